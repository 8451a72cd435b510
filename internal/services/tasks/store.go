package tasks

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// User is an account, as the API shows it.
type User struct {
	ID        int64     `json:"id"`
	Email     string    `json:"email"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
}

// Device is a user's phone or browser that receives push notifications.
type Device struct {
	ID        int64     `json:"id"`
	Platform  string    `json:"platform"`
	PushToken string    `json:"push_token"`
	CreatedAt time.Time `json:"created_at"`
}

// Task is a user's task.
type Task struct {
	ID          int64      `json:"id"`
	Title       string     `json:"title"`
	Description string     `json:"description"`
	Status      string     `json:"status"`
	Priority    int        `json:"priority"`
	DueAt       *time.Time `json:"due_at"`
	CreatedAt   time.Time  `json:"created_at"`
	UpdatedAt   time.Time  `json:"updated_at"`
	// Notes are the task's details (task_details, a has-one): the GET of
	// one task reads them with the task; lists and the answers of writes
	// leave them out (nil).
	Notes *string `json:"notes,omitempty"`
}

// dbtx is what statements run on: a connection or a transaction.
type dbtx interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// store runs the service's statements on the pool, wrapping writes in a
// transaction when Deopt.DefaultTx asks for it, and running everything in
// the request's transaction when Deopt.UserTouch opened one.
type store struct {
	pool      pool
	defaultTx bool
	// recorders write, in the transaction of each task change, the rows
	// that must commit or roll back with it. None by default: a change
	// is then the one statement report C's API ran.
	recorders []changeRecorder
}

// changeRecorder writes what a task change leaves behind in the change's
// own transaction, so it is stored exactly when the change is. It may
// set fields of ev (an event log sets its sequence).
type changeRecorder interface {
	record(ctx context.Context, q dbtx, uid int64, ev *Event) error
}

// change runs a task write f, which returns the change's event, and the
// recorders in one transaction; without recorders, f runs as any write.
func (s *store) change(ctx context.Context, uid int64, inTx bool, f func(q dbtx) (Event, error)) (Event, error) {
	var ev Event
	run := s.write
	if inTx || len(s.recorders) > 0 {
		run = s.inTx
	}
	err := run(ctx, func(q dbtx) error {
		var err error
		if ev, err = f(q); err != nil {
			return err
		}
		for _, r := range s.recorders {
			if err := r.record(ctx, q, uid, &ev); err != nil {
				return err
			}
		}
		return nil
	})
	return ev, err
}

// requestTx is the transaction around a whole request (Deopt.UserTouch),
// with what must run once it commits.
type requestTx struct {
	tx    pgx.Tx
	after []func()
}

type requestTxKey struct{}

func requestTxFrom(ctx context.Context) *requestTx {
	rt, _ := ctx.Value(requestTxKey{}).(*requestTx)
	return rt
}

// run runs f in the request's transaction (Deopt.UserTouch), or on a
// connection of the pool: in a transaction of its own when inTx.
func (s *store) run(ctx context.Context, inTx bool, f func(q dbtx) error) error {
	if rt := requestTxFrom(ctx); rt != nil {
		return f(rt.tx)
	}
	conn, release, err := s.pool.acquire(ctx)
	if err != nil {
		return fmt.Errorf("tasks: database connection: %w", err)
	}
	defer release()
	if inTx {
		return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return f(tx) })
	}
	return f(conn)
}

func (s *store) read(ctx context.Context, f func(q dbtx) error) error { return s.run(ctx, false, f) }

// write runs a write: in a transaction of its own with Deopt.DefaultTx.
func (s *store) write(ctx context.Context, f func(q dbtx) error) error {
	return s.run(ctx, s.defaultTx, f)
}

// inTx runs statements that must see each other's locks in one
// transaction, whatever Deopt.DefaultTx says.
func (s *store) inTx(ctx context.Context, f func(q dbtx) error) error { return s.run(ctx, true, f) }

// inRequestTx runs f in a transaction that first updates the user's row:
// the report's bug (Deopt.UserTouch). Statements of f's request run in it;
// the functions registered with afterCommit run once it committed.
func (s *store) inRequestTx(ctx context.Context, uid int64, f func(ctx context.Context) error) error {
	conn, release, err := s.pool.acquire(ctx)
	if err != nil {
		return fmt.Errorf("tasks: database connection: %w", err)
	}
	defer release()
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) // a no-op once committed
	if _, err := tx.Exec(ctx, `UPDATE users SET last_seen_at = now() WHERE id = $1`, uid); err != nil {
		return err
	}
	rt := &requestTx{tx: tx}
	herr := f(context.WithValue(ctx, requestTxKey{}, rt))
	// A client error (404, 422) still commits the touch, as a middleware
	// that commits whatever the handler did would; other errors roll back.
	var in *InputError
	if herr != nil && !errors.Is(herr, ErrNotFound) && !errors.As(herr, &in) {
		return herr
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	for _, fn := range rt.after {
		fn()
	}
	return herr
}

// afterCommit runs fn once the request's writes are committed: at once,
// or when the request transaction commits.
func afterCommit(ctx context.Context, fn func()) {
	if rt := requestTxFrom(ctx); rt != nil {
		rt.after = append(rt.after, fn)
		return
	}
	fn()
}

// Users.

func (s *store) createUser(ctx context.Context, email, name, hash string) (User, error) {
	u := User{Email: email, Name: name}
	err := s.write(ctx, func(q dbtx) error {
		return q.QueryRow(ctx, `INSERT INTO users (email, name, password_hash) VALUES ($1, $2, $3) RETURNING id, created_at`,
			email, name, hash).Scan(&u.ID, &u.CreatedAt)
	})
	var pg *pgconn.PgError
	if errors.As(err, &pg) && pg.Code == "23505" { // unique_violation on email
		return User{}, ErrEmailTaken
	}
	return u, err
}

// userForLogin returns the user with email and their password hash.
func (s *store) userForLogin(ctx context.Context, email string) (User, string, error) {
	var u User
	var hash string
	err := s.read(ctx, func(q dbtx) error {
		return q.QueryRow(ctx, `SELECT id, email, name, created_at, password_hash FROM users WHERE email = $1`, email).
			Scan(&u.ID, &u.Email, &u.Name, &u.CreatedAt, &hash)
	})
	return u, hash, err
}

func (s *store) noteLogin(ctx context.Context, uid int64) error {
	return s.write(ctx, func(q dbtx) error {
		_, err := q.Exec(ctx, `UPDATE users SET last_login_at = now() WHERE id = $1`, uid)
		return err
	})
}

func (s *store) user(ctx context.Context, uid int64) (User, error) {
	var u User
	err := s.read(ctx, func(q dbtx) error {
		return q.QueryRow(ctx, `SELECT id, email, name, created_at FROM users WHERE id = $1`, uid).
			Scan(&u.ID, &u.Email, &u.Name, &u.CreatedAt)
	})
	return u, err
}

// Devices.

// createDevice registers a push token for uid: a new device (created
// true), or the one that already has the token, its platform updated. A
// user past max devices (negative: no bound) gets ErrTooManyDevices. The
// user's row is locked first, so that concurrent registrations of one
// user count each other.
func (s *store) createDevice(ctx context.Context, uid int64, platform, token string, max int) (d Device, created bool, err error) {
	d = Device{Platform: platform, PushToken: token}
	err = s.inTx(ctx, func(q dbtx) error {
		if _, err := q.Exec(ctx, `SELECT 1 FROM users WHERE id = $1 FOR UPDATE`, uid); err != nil {
			return err
		}
		err := q.QueryRow(ctx, `UPDATE devices SET platform = $3 WHERE md5(push_token) = md5($2) AND user_id = $1 AND push_token = $2
			RETURNING id, created_at`, uid, token, platform).Scan(&d.ID, &d.CreatedAt)
		if !errors.Is(err, pgx.ErrNoRows) {
			return err // the token's device, or a failure
		}
		if max >= 0 {
			var n int
			if err := q.QueryRow(ctx, `SELECT count(*) FROM devices WHERE user_id = $1`, uid).Scan(&n); err != nil {
				return err
			}
			if n >= max {
				return &LimitError{Kind: "too_many_devices", Status: http.StatusConflict,
					Reason: fmt.Sprintf("this account has %d devices, the most allowed: delete one (DELETE /v1/devices/{id}) before adding another", n)}
			}
		}
		created = true
		return q.QueryRow(ctx, `INSERT INTO devices (user_id, platform, push_token) VALUES ($1, $2, $3) RETURNING id, created_at`,
			uid, platform, token).Scan(&d.ID, &d.CreatedAt)
	})
	return d, created, err
}

func (s *store) devices(ctx context.Context, uid int64) ([]Device, error) {
	var out []Device
	err := s.read(ctx, func(q dbtx) error {
		rows, err := q.Query(ctx, `SELECT id, platform, push_token, created_at FROM devices WHERE user_id = $1 ORDER BY id`, uid)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var d Device
			if err := rows.Scan(&d.ID, &d.Platform, &d.PushToken, &d.CreatedAt); err != nil {
				return err
			}
			out = append(out, d)
		}
		return rows.Err()
	})
	return out, err
}

// devicesOf returns the devices of several users in one query.
func (s *store) devicesOf(ctx context.Context, uids []int64) (map[int64][]Device, error) {
	out := make(map[int64][]Device, len(uids))
	err := s.read(ctx, func(q dbtx) error {
		rows, err := q.Query(ctx, `SELECT user_id, id, platform, push_token, created_at FROM devices WHERE user_id = ANY($1) ORDER BY id`, uids)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var uid int64
			var d Device
			if err := rows.Scan(&uid, &d.ID, &d.Platform, &d.PushToken, &d.CreatedAt); err != nil {
				return err
			}
			out[uid] = append(out[uid], d)
		}
		return rows.Err()
	})
	return out, err
}

func (s *store) deleteDevice(ctx context.Context, uid, id int64) error {
	return s.write(ctx, func(q dbtx) error {
		tag, err := q.Exec(ctx, `DELETE FROM devices WHERE id = $1 AND user_id = $2`, id, uid)
		if err == nil && tag.RowsAffected() == 0 {
			return ErrNotFound
		}
		return err
	})
}

// Tasks.

const taskColumns = `id, title, description, status, priority, due_at, created_at, updated_at`

func scanTask(row pgx.Row, t *Task) error {
	var prio int16
	err := row.Scan(&t.ID, &t.Title, &t.Description, &t.Status, &prio, &t.DueAt, &t.CreatedAt, &t.UpdatedAt)
	t.Priority = int(prio)
	return err
}

// createTask makes the task and its details row in one statement, as one
// round trip and atomically whatever Deopt.DefaultTx says.
func (s *store) createTask(ctx context.Context, uid int64, in *taskInput) (Event, error) {
	return s.change(ctx, uid, false, func(q dbtx) (Event, error) {
		t := new(Task)
		err := scanTask(q.QueryRow(ctx, `WITH t AS (
				INSERT INTO tasks (user_id, title, description, status, priority, due_at)
				VALUES ($1, $2, $3, $4, $5, $6) RETURNING `+taskColumns+`),
			d AS (INSERT INTO task_details (task_id, notes) SELECT id, $7 FROM t)
			SELECT `+taskColumns+` FROM t`,
			uid, *in.Title, deref(in.Description, ""), deref(in.Status, StatusTodo), int16(deref(in.Priority, 0)), in.DueAt.Time,
			deref(in.Notes, "")), t)
		return Event{Type: EventCreated, TaskID: t.ID, Task: t, At: t.UpdatedAt}, err
	})
}

// TaskQuery is the task's GET: the task with its details, as GORM reads
// a has-one association with Joins preload and First, which is report
// C's slow GET: a LEFT JOIN of the association's table, ORDER BY the
// primary key, LIMIT 1. The ORDER BY column is indexed either way (the
// primary key); the join's column is indexed by report C's optimization 3
// (migration 0005), without which the join scans task_details. The lab
// times this query with EXPLAIN ANALYZE on its seeded data.
const TaskQuery = `SELECT t.id, t.title, t.description, t.status, t.priority, t.due_at, t.created_at, t.updated_at, d.notes
	FROM tasks t LEFT JOIN task_details d ON d.task_id = t.id
	WHERE t.id = $1 AND t.user_id = $2 ORDER BY t.id LIMIT 1`

func (s *store) task(ctx context.Context, uid, id int64) (Task, error) {
	var t Task
	var prio int16
	err := s.read(ctx, func(q dbtx) error {
		return q.QueryRow(ctx, TaskQuery, id, uid).
			Scan(&t.ID, &t.Title, &t.Description, &t.Status, &prio, &t.DueAt, &t.CreatedAt, &t.UpdatedAt, &t.Notes)
	})
	t.Priority = int(prio)
	if errors.Is(err, pgx.ErrNoRows) {
		err = ErrNotFound
	}
	return t, err
}

// updateTask changes the fields set in in; one statement whatever is set,
// so it is prepared once per connection.
func (s *store) updateTask(ctx context.Context, uid, id int64, in *taskInput) (Event, error) {
	var prio *int16
	if in.Priority != nil {
		p := int16(*in.Priority)
		prio = &p
	}
	// New notes change the details row in the same transaction.
	ev, err := s.change(ctx, uid, in.Notes != nil, func(q dbtx) (Event, error) {
		t := new(Task)
		ev := Event{Type: EventUpdated, TaskID: id, Task: t}
		err := scanTask(q.QueryRow(ctx, `UPDATE tasks SET
				title = coalesce($3, title),
				description = coalesce($4, description),
				status = coalesce($5, status),
				priority = coalesce($6, priority),
				due_at = CASE WHEN $7 THEN $8 ELSE due_at END,
				updated_at = now()
			WHERE id = $1 AND user_id = $2 RETURNING `+taskColumns,
			id, uid, in.Title, in.Description, in.Status, prio, in.DueAt.Set, in.DueAt.Time), t)
		ev.At = t.UpdatedAt
		if err != nil || in.Notes == nil {
			return ev, err
		}
		_, err = q.Exec(ctx, `UPDATE task_details SET notes = $2 WHERE task_id = $1`, id, *in.Notes)
		return ev, err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		err = ErrNotFound
	}
	return ev, err
}

func (s *store) deleteTask(ctx context.Context, uid, id int64) (Event, error) {
	return s.change(ctx, uid, false, func(q dbtx) (Event, error) {
		tag, err := q.Exec(ctx, `DELETE FROM tasks WHERE id = $1 AND user_id = $2`, id, uid)
		if err == nil && tag.RowsAffected() == 0 {
			return Event{}, ErrNotFound
		}
		return Event{Type: EventDeleted, TaskID: id, At: time.Now().UTC()}, err
	})
}

// listSorts maps the sort parameter to an ORDER BY; id breaks ties so
// pages do not overlap.
var listSorts = map[string]string{
	"created_at":  "created_at, id",
	"-created_at": "created_at DESC, id DESC",
	"updated_at":  "updated_at, id",
	"-updated_at": "updated_at DESC, id DESC",
	"due_at":      "due_at NULLS LAST, id",
	"-due_at":     "due_at DESC NULLS LAST, id DESC",
	"priority":    "priority, id",
	"-priority":   "priority DESC, id DESC",
}

// listFilter is a validated list query.
type listFilter struct {
	status              string // "" = any
	priority            int    // -1 = any
	dueBefore, dueAfter *time.Time
	sort                string // a key of listSorts
	limit, offset       int
}

func (s *store) listTasks(ctx context.Context, uid int64, f listFilter) ([]Task, error) {
	var sql strings.Builder
	sql.WriteString(`SELECT ` + taskColumns + ` FROM tasks WHERE user_id = $1`)
	args := []any{uid}
	arg := func(cond string, v any) {
		args = append(args, v)
		fmt.Fprintf(&sql, " AND %s $%d", cond, len(args))
	}
	if f.status != "" {
		arg("status =", f.status)
	}
	if f.priority >= 0 {
		arg("priority =", int16(f.priority))
	}
	if f.dueBefore != nil {
		arg("due_at <", *f.dueBefore)
	}
	if f.dueAfter != nil {
		arg("due_at >=", *f.dueAfter)
	}
	sql.WriteString(" ORDER BY " + listSorts[f.sort])
	args = append(args, f.limit, f.offset)
	fmt.Fprintf(&sql, " LIMIT $%d OFFSET $%d", len(args)-1, len(args))
	out := make([]Task, 0, f.limit)
	err := s.read(ctx, func(q dbtx) error {
		rows, err := q.Query(ctx, sql.String(), args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var t Task
			if err := scanTask(rows, &t); err != nil {
				return err
			}
			out = append(out, t)
		}
		return rows.Err()
	})
	return out, err
}

func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// claimTicket marks a WebSocket ticket (by its MAC) used until it
// expires, and says whether it was unused: the instances of a deployment
// share the table, so a ticket is good once on all of them together. The
// same statement deletes a few claims of expired tickets, so the table
// holds about the tickets of the last TicketTTL.
func (s *store) claimTicket(ctx context.Context, mac []byte, until time.Time) (bool, error) {
	var claimed bool
	err := s.write(ctx, func(q dbtx) error {
		tag, err := q.Exec(ctx, `WITH expired AS (
				DELETE FROM used_tickets WHERE mac IN (
					SELECT mac FROM used_tickets WHERE until < now() LIMIT 8 FOR UPDATE SKIP LOCKED))
			INSERT INTO used_tickets (mac, until) VALUES ($1, $2) ON CONFLICT (mac) DO NOTHING`, mac, until)
		claimed = tag.RowsAffected() == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("tasks: claim the WebSocket ticket: %w", err)
	}
	return claimed, nil
}
