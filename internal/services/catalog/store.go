package catalog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/highload-lab/hlab/internal/services/refdata"
)

// store reads customers.
type store interface {
	get(ctx context.Context, id int32) (refdata.Customer, error)
	// list appends up to limit customers of region, by name then id.
	list(ctx context.Context, region string, limit int, out []refdata.Customer) ([]refdata.Customer, error)
}

// replicaStore serves everything from memory: no query at all.
type replicaStore struct {
	c   *refdata.Customers
	rep *refdata.Replica
}

func (s replicaStore) get(_ context.Context, id int32) (refdata.Customer, error) {
	if err := s.rep.Check(errs); err != nil {
		return refdata.Customer{}, err
	}
	c, ok := s.c.Table.Get(id)
	if !ok {
		return c, fmt.Errorf("%w: customer %d", ErrNotFound, id)
	}
	return c, nil
}

func (s replicaStore) list(_ context.Context, region string, limit int, out []refdata.Customer) ([]refdata.Customer, error) {
	if err := s.rep.Check(errs); err != nil {
		return out, err
	}
	// The pivot sorts before every customer of the region (ids are >= 1).
	s.c.Index.AscendFrom(refdata.Customer{Region: region}, func(c refdata.Customer) bool {
		if c.Region != region || len(out) == limit {
			return false
		}
		out = append(out, c)
		return true
	})
	return out, nil
}

const (
	customerCols = "id, name, region, email, phone, credit_limit_cents, updated_at"
	qGet         = "SELECT " + customerCols + " FROM customers WHERE id = $1"
	// COLLATE "C" orders names as Go compares them, and matches the index.
	qList = "SELECT " + customerCols + ` FROM customers WHERE region = $1 ORDER BY name COLLATE "C", id LIMIT $2`
)

// pgStore queries Postgres: one query per request, for comparison. Each
// query is bounded by timeout.
type pgStore struct {
	pool    *pgxpool.Pool
	timeout time.Duration
}

func scanCustomer(row pgx.Row, c *refdata.Customer) error {
	return row.Scan(&c.ID, &c.Name, &c.Region, &c.Email, &c.Phone, &c.CreditLimitCents, &c.UpdatedAt)
}

func (s pgStore) get(ctx context.Context, id int32) (refdata.Customer, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var c refdata.Customer
	err := scanCustomer(s.pool.QueryRow(ctx, qGet, id), &c)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return c, fmt.Errorf("%w: customer %d", ErrNotFound, id)
	case err != nil:
		return c, fmt.Errorf("%w: %w", ErrDatabase, err)
	}
	return c, nil
}

func (s pgStore) list(ctx context.Context, region string, limit int, out []refdata.Customer) ([]refdata.Customer, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	rows, err := s.pool.Query(ctx, qList, region, limit)
	if err != nil {
		return out, fmt.Errorf("%w: %w", ErrDatabase, err)
	}
	defer rows.Close()
	for rows.Next() {
		var c refdata.Customer
		if err := scanCustomer(rows, &c); err != nil {
			return out, fmt.Errorf("%w: %w", ErrDatabase, err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return out, fmt.Errorf("%w: %w", ErrDatabase, err)
	}
	return out, nil
}
