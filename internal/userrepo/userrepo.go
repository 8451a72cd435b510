// Package userrepo is report B's user repository: one interface, Get a
// user by id, over PostgreSQL, Redis, MongoDB and an in-memory replica
// kept fresh by change data capture (replica.Table). Its benchmark
// (go test -bench . ./internal/userrepo, part of make bench) measures
// the four in one run on the same data set, the report's "four orders of
// magnitude" between the in-memory copy and a network round trip.
//
// Here MongoDB is a stand-in (mongo-java-server, see internal/deps): a
// real mongod cannot be installed on the machines hlab is built for, so
// the MongoDB figures are those of the stand-in, and say so.
package userrepo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/highload-lab/hlab/internal/mongoload"
	"github.com/highload-lab/hlab/replica"
)

// ErrNotFound is returned by every Repo's Get for an id that has no user.
var ErrNotFound = errors.New("userrepo: no user with that id")

// User is what the repository stores.
type User struct {
	ID        int64     `json:"id" bson:"_id"`
	Name      string    `json:"name" bson:"name"`
	Email     string    `json:"email" bson:"email"`
	Country   string    `json:"country" bson:"country"`
	CreatedAt time.Time `json:"created_at" bson:"created_at"`
}

// Repo gets users by id. Implementations are safe for concurrent use.
type Repo interface {
	// Get returns the user with id, or ErrNotFound.
	Get(ctx context.Context, id int64) (User, error)
}

var (
	_ Repo = (*Postgres)(nil)
	_ Repo = (*Redis)(nil)
	_ Repo = (*Mongo)(nil)
	_ Repo = (*Replica)(nil)
)

// Users returns n users with ids 1..n, the same for the same seed.
func Users(n int, seed uint64) []User {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	countries := []string{"DE", "FR", "IT", "ES", "PL", "NL", "SE", "RU", "KZ", "US"}
	base := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	users := make([]User, n)
	for i := range users {
		id := int64(i + 1)
		users[i] = User{
			ID:      id,
			Name:    "user " + strconv.FormatInt(id, 10),
			Email:   "user" + strconv.FormatInt(id, 10) + "@example.com",
			Country: countries[r.IntN(len(countries))],
			// Millisecond precision: what every store here keeps.
			CreatedAt: base.Add(time.Duration(r.Int64N(int64(5 * 365 * 24 * time.Hour)))).Truncate(time.Millisecond),
		}
	}
	return users
}

// Postgres reads users from a users table (see PostgresSchema) with one
// query per Get, through a pgx pool (prepared statements, cached).
type Postgres struct{ pool *pgxpool.Pool }

// PostgresSchema creates the users table.
const PostgresSchema = `CREATE TABLE users (
	id bigint PRIMARY KEY,
	name text NOT NULL,
	email text NOT NULL,
	country text NOT NULL,
	created_at timestamptz NOT NULL
)`

// NewPostgres returns a Repo over pool.
func NewPostgres(pool *pgxpool.Pool) *Postgres { return &Postgres{pool: pool} }

// Get implements Repo.
func (p *Postgres) Get(ctx context.Context, id int64) (User, error) {
	var u User
	err := p.pool.QueryRow(ctx, "SELECT id, name, email, country, created_at FROM users WHERE id = $1", id).
		Scan(&u.ID, &u.Name, &u.Email, &u.Country, &u.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return User{}, ErrNotFound
	}
	if err != nil {
		return User{}, fmt.Errorf("userrepo: postgres get %d: %w", id, err)
	}
	return u, nil
}

// LoadPostgres creates the users table and copies users into it.
func LoadPostgres(ctx context.Context, pool *pgxpool.Pool, users []User) error {
	if _, err := pool.Exec(ctx, PostgresSchema); err != nil {
		return fmt.Errorf("userrepo: create users: %w", err)
	}
	_, err := pool.CopyFrom(ctx, pgx.Identifier{"users"}, []string{"id", "name", "email", "country", "created_at"},
		pgx.CopyFromSlice(len(users), func(i int) ([]any, error) {
			u := users[i]
			return []any{u.ID, u.Name, u.Email, u.Country, u.CreatedAt}, nil
		}))
	if err != nil {
		return fmt.Errorf("userrepo: copy users: %w", err)
	}
	return nil
}

// Redis reads users stored as JSON under "user:<id>", a GET per Get: the
// usual cache-aside layout.
type Redis struct{ client *redis.Client }

// NewRedis returns a Repo over client.
func NewRedis(client *redis.Client) *Redis { return &Redis{client: client} }

func redisKey(id int64) string { return "user:" + strconv.FormatInt(id, 10) }

// Get implements Repo.
func (r *Redis) Get(ctx context.Context, id int64) (User, error) {
	b, err := r.client.Get(ctx, redisKey(id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return User{}, ErrNotFound
	}
	if err != nil {
		return User{}, fmt.Errorf("userrepo: redis get %d: %w", id, err)
	}
	var u User
	if err := json.Unmarshal(b, &u); err != nil {
		return User{}, fmt.Errorf("userrepo: redis user %d: %w", id, err)
	}
	return u, nil
}

// LoadRedis stores users, 1000 per round trip.
func LoadRedis(ctx context.Context, client *redis.Client, users []User) error {
	for start := 0; start < len(users); start += 1000 {
		pipe := client.Pipeline()
		for _, u := range users[start:min(start+1000, len(users))] {
			b, err := json.Marshal(u)
			if err != nil {
				return err
			}
			pipe.Set(ctx, redisKey(u.ID), b, 0)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return fmt.Errorf("userrepo: redis load: %w", err)
		}
	}
	return nil
}

// Mongo reads users from a collection, _id = the user's id, a find by
// _id per Get.
type Mongo struct{ coll *mongo.Collection }

// NewMongo returns a Repo over coll.
func NewMongo(coll *mongo.Collection) *Mongo { return &Mongo{coll: coll} }

// Get implements Repo.
func (m *Mongo) Get(ctx context.Context, id int64) (User, error) {
	var u User
	err := m.coll.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&u)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return User{}, ErrNotFound
	}
	if err != nil {
		return User{}, fmt.Errorf("userrepo: mongo get %d: %w", id, err)
	}
	return u, nil
}

// LoadMongo inserts users, 1000 per round trip.
func LoadMongo(ctx context.Context, coll *mongo.Collection, users []User) error {
	docs := make([]any, len(users))
	for i, u := range users {
		docs[i] = u
	}
	if err := mongoload.Insert(ctx, coll, docs); err != nil {
		return fmt.Errorf("userrepo: mongo load: %w", err)
	}
	return nil
}

// Replica reads users from an in-memory table that a replica source
// keeps fresh: a map lookup, no round trip, no allocation.
type Replica struct{ t *replica.Table[int64, User] }

// NewReplica returns a Repo over t.
func NewReplica(t *replica.Table[int64, User]) *Replica { return &Replica{t: t} }

// Get implements Repo.
func (r *Replica) Get(_ context.Context, id int64) (User, error) {
	u, ok := r.t.Get(id)
	if !ok {
		return User{}, ErrNotFound
	}
	return u, nil
}

// BindMongo binds t to a MongoDB users collection (as LoadMongo writes
// it), for replica.NewMongoSource.
func BindMongo(t *replica.Table[int64, User]) replica.Binding {
	return replica.Bind(t, mongoID, func(r replica.Row) (User, error) {
		id, err := mongoID(r)
		if err != nil {
			return User{}, err
		}
		name, ok1 := r["name"].(string)
		email, ok2 := r["email"].(string)
		country, ok3 := r["country"].(string)
		created, ok4 := r["created_at"].(bson.DateTime)
		if !ok1 || !ok2 || !ok3 || !ok4 {
			return User{}, fmt.Errorf("fields of the wrong type: name %T, email %T, country %T, created_at %T", r["name"], r["email"], r["country"], r["created_at"])
		}
		return User{ID: id, Name: name, Email: email, Country: country, CreatedAt: created.Time().UTC()}, nil
	})
}

func mongoID(r replica.Row) (int64, error) {
	switch id := r["_id"].(type) {
	case int64:
		return id, nil
	case int32:
		return int64(id), nil
	}
	return 0, fmt.Errorf("_id is %T, want an integer", r["_id"])
}

// BindPostgres binds t to the users table (see PostgresSchema), for
// replica.NewPostgresSource.
func BindPostgres(t *replica.Table[int64, User]) replica.Binding {
	return replica.Bind(t, func(r replica.Row) (int64, error) {
		id, ok := r["id"].(int64)
		if !ok {
			return 0, fmt.Errorf("id is %T, want int64", r["id"])
		}
		return id, nil
	}, func(r replica.Row) (User, error) {
		name, ok1 := r["name"].(string)
		email, ok2 := r["email"].(string)
		country, ok3 := r["country"].(string)
		created, ok4 := r["created_at"].(time.Time)
		if !ok1 || !ok2 || !ok3 || !ok4 {
			return User{}, fmt.Errorf("columns of the wrong type: name %T, email %T, country %T, created_at %T", r["name"], r["email"], r["country"], r["created_at"])
		}
		return User{ID: r["id"].(int64), Name: name, Email: email, Country: country, CreatedAt: created.UTC()}, nil
	})
}
