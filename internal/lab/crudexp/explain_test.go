package crudexp

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/highload-lab/hlab/internal/deps/depstest"
	"github.com/highload-lab/hlab/internal/lab"
	"github.com/highload-lab/hlab/internal/services/tasks"
)

// TestSeededJoinDominatesWithoutIndex explains the GET's query on the
// lab's seed, kept small (300 accounts, 30,000 tasks: seconds): without
// the join's index most of its time is the LEFT JOIN, which scans
// task_details, as in the report's plan; once the indexes are built (the
// all-on database) the join reads task_details by the index, and the
// query is several times faster. The indexes the join finds either way
// are the ones the Spec declares.
func TestSeededJoinDominatesWithoutIndex(t *testing.T) {
	ctx := t.Context()
	pg := depstest.Postgres(t)
	name := fmt.Sprintf("crud_explain_%d", time.Now().UnixNano())
	if err := pg.CreateDatabase(ctx, name); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, pg.DSN(name))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	const users = 300
	if err := seedOne(ctx, conn, users, false); err != nil {
		t.Fatal(err)
	}
	id, uid, err := probeTask(ctx, conn, users)
	if err != nil {
		t.Fatal(err)
	}
	without, err := explainQuery(ctx, conn, tasks.TaskQuery, id, uid)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("without the index: %.3f ms: %s", without.execMS, without.root.String())
	if !slices.Contains(without.root.scans("task_details"), "Seq Scan") || without.joinMS < 0.5*without.execMS {
		t.Errorf("without the index the join takes %.3f of %.3f ms, reading task_details by %v: want a Seq Scan, most of the time",
			without.joinMS, without.execMS, without.root.scans("task_details"))
	}
	off, err := joinIndexes(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}

	if _, err := tasks.Migrate(ctx, conn); err != nil {
		t.Fatal(err)
	}
	with, err := explainQuery(ctx, conn, tasks.TaskQuery, id, uid)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("with the index: %.3f ms: %s", with.execMS, with.root.String())
	if scans := with.root.scans("task_details"); slices.Contains(scans, "Seq Scan") || len(scans) == 0 {
		t.Errorf("with the index the join reads task_details by %v, want an index", scans)
	}
	if with.execMS*3 > without.execMS {
		t.Errorf("the GET's query takes %.3f ms with the index, %.3f ms without: want it several times faster", with.execMS, without.execMS)
	}
	on, err := joinIndexes(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range New().Spec(lab.Options{Mode: lab.Quick}).Setup {
		if s.Item == itemJoinIndex && s.Ours != joinIndexText(off, on) {
			t.Errorf("the join finds %q, the Spec declares %q", joinIndexText(off, on), s.Ours)
		}
	}
}

// TestPlanString: a plan's top nodes read on one line, each with its
// time, the scan's filtered rows, children after ">" and siblings in
// parentheses.
func TestPlanString(t *testing.T) {
	root := planNode{NodeType: "Limit", TotalMS: 12.1, Loops: 1, Plans: []planNode{{
		NodeType: "Nested Loop", JoinType: "Left", TotalMS: 12.1, Loops: 1, Plans: []planNode{
			{NodeType: "Index Scan", Index: "tasks_pkey", Relation: "tasks", TotalMS: 0.012, Loops: 1},
			{NodeType: "Seq Scan", Relation: "task_details", TotalMS: 12, Loops: 1, Removed: 199999},
		}}}}
	want := "Limit 12.1 ms > Nested Loop Left Join 12.1 ms > (Index Scan using tasks_pkey on tasks 0.012 ms; Seq Scan on task_details 12 ms, 199,999 rows removed by filter)"
	if got := root.String(); got != want {
		t.Errorf("plan = %q\nwant   %q", got, want)
	}
	if j := root.firstJoin(); j == nil || j.NodeType != "Nested Loop" {
		t.Errorf("first join = %+v", j)
	}
}
