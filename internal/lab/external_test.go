package lab_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/deps/depstest"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/lab/labtest"
	"github.com/highload-lab/hlab/internal/lab/replicaexp"
)

func TestMain(m *testing.M) { os.Exit(depstest.Run(m)) }

// onServers is an experiment that makes on its servers what the real
// ones do (a database with a table, a publication and a logical slot; a
// topic and a consumer group), then fails or not, stopping its handles
// or not: the lab must drop everything either way.
type onServers struct {
	fail, stop bool
	made       []string
	// interrupted, when set, is closed once everything is made; the
	// experiment then waits for its context's end, as a run Ctrl-C stops.
	interrupted chan struct{}
}

func (*onServers) Spec(lab.Options) lab.Spec {
	return lab.Spec{Name: "ext", Title: "external servers", Needs: []string{lab.DepPostgres, lab.DepKafka}}
}
func (*onServers) Estimate(lab.Options) time.Duration { return time.Second }
func (e *onServers) note(what string)                 { e.made = append(e.made, what) }
func (e *onServers) Run(ctx context.Context, run *lab.Run) error {
	pg, err := run.Postgres(ctx, deps.PostgresConfig{})
	if err != nil {
		return err
	}
	if e.stop {
		defer pg.Stop()
	}
	if !pg.External() || pg.Proc() != nil || !errors.Is(pg.StopServer(), deps.ErrExternal) {
		return errors.New("not an external server, or one the lab could stop")
	}
	if err := pg.CreateDatabase(ctx, "db"); err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, pg.DSN("db"))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for _, q := range []string{"CREATE TABLE t (id int primary key)", "CREATE PUBLICATION p FOR TABLE t"} {
		if _, err := conn.Exec(ctx, q); err != nil {
			return err
		}
	}
	slot := pg.Unique("slot")
	if _, err := conn.Exec(ctx, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", slot); err != nil {
		return err
	}
	e.note(slot)
	k, err := run.StartKafka(ctx, 1)
	if err != nil {
		return err
	}
	if e.stop {
		defer k.Stop()
	}
	topic := k.Topic("events")
	if err := k.CreateTopic(ctx, topic, 1); err != nil {
		return err
	}
	e.note(topic)
	if e.interrupted != nil {
		close(e.interrupted)
		<-ctx.Done()
		return ctx.Err()
	}
	if e.fail {
		return errors.New("failed on purpose")
	}
	return nil
}

// TestExternalServersCleanedUp runs an experiment against a Postgres and
// a Kafka it did not start: the run records them (password redacted,
// quotas not the lab's), leaves nothing behind, whether the experiment
// failed or stopped its handles, and does not stop them.
func TestExternalServersCleanedUp(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Postgres")
	}
	pg := depstest.Postgres(t)
	k := depstest.Kafka(t, deps.KafkaFake)
	ext := lab.External{Postgres: pg.DSN("postgres"), KafkaBrokers: k.Brokers}
	for _, tc := range []struct {
		name                    string
		fail, stop, interrupted bool
	}{
		{"succeeds, stops its handles", false, true, false},
		{"fails, leaves its handles", true, false, false},
		{"interrupted, leaves its handles", true, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exp := &onServers{fail: tc.fail, stop: tc.stop}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.interrupted {
				exp.interrupted = make(chan struct{})
				go func() { <-exp.interrupted; cancel() }()
			}
			opts := lab.Options{Mode: lab.Quick, WorkDir: t.TempDir(), External: ext}
			if err := lab.CheckExternal(context.Background(), []lab.Experiment{exp}, opts); err != nil {
				t.Fatal(err)
			}
			var progress strings.Builder
			results, err := lab.RunAll(ctx, []lab.Experiment{exp}, opts, depstest.Sandbox(t), lab.NewProgress(&progress, false))
			if (err != nil) != tc.interrupted {
				t.Fatalf("run: %v", err)
			}
			res := results[0]
			if failed := res.Error != ""; failed != tc.fail || len(exp.made) != 2 {
				t.Fatalf("error %q, made %v\n%s", res.Error, exp.made, progress.String())
			}
			for _, name := range exp.made {
				if !strings.HasPrefix(name, "hlab_ext_") {
					t.Errorf("%q is not named for the run", name)
				}
			}
			labtest.ExternalEnv(t, res.Env, "postgres", pg.Password)
			labtest.ExternalEnv(t, res.Env, "kafka", "")
			if !strings.Contains(res.Env["postgres"], "postgres:***@"+pg.Addr) || !strings.Contains(res.Env["postgres"], pg.Version) {
				t.Errorf("env postgres = %q: want the redacted URL and the version %s", res.Env["postgres"], pg.Version)
			}
			if left := labtest.PostgresLeftovers(t, ext.Postgres); len(left) > 0 {
				t.Errorf("left on postgres: %v", left)
			}
			if left := labtest.KafkaLeftovers(t, k.Brokers); len(left) > 0 {
				t.Errorf("left on kafka: %v", left)
			}
		})
	}
}

// TestCheckExternal: the flags are checked before a run, and the errors
// say which flag and what to do.
func TestCheckExternal(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Postgres")
	}
	pg := depstest.Postgres(t)
	port, err := deps.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	noDeps := &noDeps{}
	// A server without logical replication, for the replica experiment.
	physical, err := deps.StartPostgres(context.Background(), depstest.Sandbox(t), deps.PostgresConfig{Settings: map[string]string{"wal_level": "replica"}})
	if err != nil {
		t.Fatal(err)
	}
	defer physical.Stop()
	for _, tc := range []struct {
		name string
		exps []lab.Experiment
		ext  lab.External
		want string // in the error; "" = none
	}{
		{"fine", []lab.Experiment{&onServers{}}, lab.External{Postgres: pg.DSN("postgres")}, ""},
		{"unused", []lab.Experiment{noDeps}, lab.External{Postgres: pg.DSN("postgres")}, "--postgres is unused: none of the experiments selected (none) uses postgres"},
		{"unused by any selected", []lab.Experiment{&onServers{}}, lab.External{Cassandra: "127.0.0.1:9042"}, "--cassandra is unused"},
		{"not a URL", []lab.Experiment{&onServers{}}, lab.External{Postgres: "host=x user=y"}, "is not a Postgres URL: give postgres://"},
		{"unreachable", []lab.Experiment{&onServers{}}, lab.External{Postgres: "postgres://u:secret@127.0.0.1:" + itoa(port) + "/db"}, "cannot connect to the Postgres server at postgres://u:***@127.0.0.1:"},
		{"no logical replication", []lab.Experiment{replicaexp.New()}, lab.External{Postgres: physical.DSN("postgres")}, "has wal_level=replica; change data capture needs logical replication: set wal_level = logical"},
		{"logical replication", []lab.Experiment{replicaexp.New()}, lab.External{Postgres: pg.DSN("postgres")}, ""},
		{"kafka real and brokers", []lab.Experiment{&onServers{}}, lab.External{KafkaBrokers: []string{"127.0.0.1:9092"}}, "exclude each other"},
		{"brokers not host:port", []lab.Experiment{&onServers{}}, lab.External{KafkaBrokers: []string{"kafka"}}, `--kafka-brokers: "kafka" is not host:port`},
		{"brokers unreachable", []lab.Experiment{&onServers{}}, lab.External{KafkaBrokers: []string{"127.0.0.1:" + itoa(port)}}, "cannot reach the Kafka brokers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := lab.Options{External: tc.ext}
			if tc.name == "kafka real and brokers" {
				o.Kafka = lab.KafkaReal
			}
			err := lab.CheckExternal(context.Background(), tc.exps, o)
			switch {
			case tc.want == "" && err != nil:
				t.Fatal(err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one with %q", err, tc.want)
			case err != nil && strings.Contains(err.Error(), "secret"):
				t.Fatalf("the error shows the password: %v", err)
			}
		})
	}
}

// noDeps is an experiment that needs no external server.
type noDeps struct{ onServers }

func (*noDeps) Spec(lab.Options) lab.Spec { return lab.Spec{Name: "none", Title: "no dependencies"} }

func itoa(n int) string { return strconv.Itoa(n) }
