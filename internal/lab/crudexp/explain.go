package crudexp

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/highload-lab/hlab/internal/services/tasks"
)

// explainRuns is how many times the GET's query is explained on each
// database; the median by execution time is kept (the first run reads
// pages the later ones find cached).
const explainRuns = 3

// plan is what EXPLAIN (ANALYZE, FORMAT JSON) says of one run of a
// query: its execution time, the time of its first join node (with its
// children, over its loops), and its plan tree.
type plan struct {
	execMS, joinMS float64
	root           planNode
}

// planNode is one node of a JSON plan, the fields the lab reads.
type planNode struct {
	NodeType string     `json:"Node Type"`
	JoinType string     `json:"Join Type"`
	Relation string     `json:"Relation Name"`
	Index    string     `json:"Index Name"`
	TotalMS  float64    `json:"Actual Total Time"`
	Loops    float64    `json:"Actual Loops"`
	Removed  float64    `json:"Rows Removed by Filter"`
	Plans    []planNode `json:"Plans"`
}

// explainQuery runs EXPLAIN ANALYZE of query with args on conn
// explainRuns times and returns the median run's plan.
func explainQuery(ctx context.Context, conn *pgx.Conn, query string, args ...any) (plan, error) {
	var runs []plan
	for range explainRuns {
		var out []byte
		if err := conn.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+query, args...).Scan(&out); err != nil {
			return plan{}, fmt.Errorf("crud: explain: %w", err)
		}
		var doc []struct {
			Plan   planNode `json:"Plan"`
			ExecMS float64  `json:"Execution Time"`
		}
		if err := json.Unmarshal(out, &doc); err != nil || len(doc) != 1 {
			return plan{}, fmt.Errorf("crud: explain: a plan of %d documents (%v)", len(doc), err)
		}
		p := plan{execMS: doc[0].ExecMS, root: doc[0].Plan}
		if j := p.root.firstJoin(); j != nil {
			p.joinMS = j.TotalMS * max(j.Loops, 1)
		}
		runs = append(runs, p)
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].execMS < runs[j].execMS })
	return runs[len(runs)/2], nil
}

// firstJoin returns the topmost join node of the tree, nil when none.
func (n *planNode) firstJoin() *planNode {
	if n.JoinType != "" {
		return n
	}
	for i := range n.Plans {
		if j := n.Plans[i].firstJoin(); j != nil {
			return j
		}
	}
	return nil
}

// scans lists the tree's nodes that read relation: "Seq Scan",
// "Index Scan", ...
func (n *planNode) scans(relation string) []string {
	var out []string
	if n.Relation == relation {
		out = append(out, n.NodeType)
	}
	for i := range n.Plans {
		out = append(out, n.Plans[i].scans(relation)...)
	}
	return out
}

// String gives the plan's top nodes on one line, each with its actual
// time (a node's time includes its children's), children after ">" and
// siblings in parentheses: "Limit 12.1 ms > Nested Loop Left Join 12.1 ms
// > (Index Scan using tasks_pkey on tasks 0.01 ms; Seq Scan on
// task_details 12.0 ms, 199,999 rows removed by filter)".
func (n *planNode) String() string { return n.render(4) }

func (n *planNode) render(depth int) string {
	var b strings.Builder
	// As EXPLAIN's text names joins: "Hash Left Join", "Nested Loop Left Join".
	switch name, ok := strings.CutSuffix(n.NodeType, " Join"); {
	case n.JoinType == "" || n.JoinType == "Inner":
		b.WriteString(n.NodeType)
	case ok:
		fmt.Fprintf(&b, "%s %s Join", name, n.JoinType)
	default:
		fmt.Fprintf(&b, "%s %s Join", n.NodeType, n.JoinType)
	}
	if n.Index != "" {
		fmt.Fprintf(&b, " using %s", n.Index)
	}
	if n.Relation != "" {
		fmt.Fprintf(&b, " on %s", n.Relation)
	}
	fmt.Fprintf(&b, " %.3g ms", n.TotalMS*max(n.Loops, 1))
	if n.Removed > 0 {
		fmt.Fprintf(&b, ", %s rows removed by filter", thousands(int64(n.Removed*max(n.Loops, 1))))
	}
	if depth <= 1 || len(n.Plans) == 0 {
		return b.String()
	}
	var kids []string
	for i := range n.Plans {
		kids = append(kids, n.Plans[i].render(depth-1))
	}
	if len(kids) == 1 {
		return b.String() + " > " + kids[0]
	}
	return b.String() + " > (" + strings.Join(kids, "; ") + ")"
}

// thousands writes n with commas between groups of three digits.
func thousands(n int64) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// probeTask returns a seeded task of an account no VU signs in as, and
// its owner: the task the GET's query is explained for. It is the
// account's last seeded task, whose details row is near the end of
// task_details, as a task just made under load has its own: without the
// index the join's scan reads the table up to it (and stops there, the
// LIMIT met), as it does for the load's gets.
func probeTask(ctx context.Context, conn *pgx.Conn, users int) (id, uid int64, err error) {
	uid = int64(max(users/2, vus/devicesPerUser+1))
	err = conn.QueryRow(ctx, `SELECT id FROM tasks WHERE user_id = $1 ORDER BY id DESC LIMIT 1`, uid).Scan(&id)
	if err != nil {
		return 0, 0, fmt.Errorf("crud: a seeded task of user %d: %w", uid, err)
	}
	return id, uid, nil
}

// joinIndexes lists the indexes on task_details beside its primary key
// as the catalog defines them, "none" when there are none: what the
// GET's join finds, with or without report C's optimization 3.
func joinIndexes(ctx context.Context, conn *pgx.Conn) (string, error) {
	var defs string
	err := conn.QueryRow(ctx, `SELECT coalesce(string_agg(indexdef, '; ' ORDER BY indexname), 'none')
		FROM pg_indexes WHERE schemaname = current_schema() AND tablename = 'task_details' AND indexname <> 'task_details_pkey'`).Scan(&defs)
	if err != nil {
		return "", fmt.Errorf("crud: the indexes of task_details: %w", err)
	}
	return defs, nil
}

// explainGet explains the task GET's query (tasks.TaskQuery, the query
// the claim's rows run on every get) on each database as seeded, before
// any load, and records what the claim's rows run with: the query, and
// the indexes its join finds with and without optimization 3.
func (b *bench) explainGet(ctx context.Context) error {
	b.run.Progress.Step("postgres: EXPLAIN ANALYZE the GET's query", 0)
	idx := map[bool]string{}
	for _, withIdx := range []bool{false, true} {
		conn := b.dbs[withIdx]
		id, uid, err := probeTask(ctx, conn, b.users)
		if err != nil {
			return err
		}
		p, err := explainQuery(ctx, conn, tasks.TaskQuery, id, uid)
		if err != nil {
			return err
		}
		b.getPlan[withIdx] = p
		if idx[withIdx], err = joinIndexes(ctx, conn); err != nil {
			return err
		}
		b.run.Note("the GET's query %s, on the seeded data: EXPLAIN ANALYZE %.3g ms, its LEFT JOIN %.3g ms (a node's time includes its children's): %s",
			map[bool]string{true: "with the join's index (all on)", false: "without the join's index (all off, 3. indexes off)"}[withIdx],
			p.execMS, p.joinMS, p.root.String())
	}
	b.run.UsedInFirstClaim(itemGetQuery, tasks.TaskQuery)
	b.run.UsedInFirstClaim(itemJoinIndex, joinIndexText(idx[false], idx[true]))
	return nil
}

// joinIndexText is the join-index setup item's value: the indexes the
// all-off and the all-on rows' join finds.
func joinIndexText(off, on string) string { return "all off: " + off + "; all on: " + on }
