package cli

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"

	"github.com/highload-lab/hlab/internal/deps"
	"github.com/highload-lab/hlab/internal/sandbox"
)

func runDeps(args []string, st *State) int {
	fs := newFlagSet(st, "deps", "hlab deps status|install [NAME...]", `
Checks and installs the real dependencies the lab and tests use.
  status            which dependencies are installed, with their versions
  install NAME...   install them from Debian's packages (needs root and apt-get)
  up kafka[@VERSION]  run a real single-node broker in the foreground (on free
                    ports; "kafka up: brokers HOST:PORT" on stdout once it
                    answers, after "kafka tools: DIR", the jars of Kafka's
                    tools such as kafka-producer-perf-test; Ctrl-C or
                    SIGTERM stops it and removes its data)

Known: nginx (load balancer of the scale experiment), wrk (for side-by-side
checks of hlab load), redis (redis-server, report B's benchmark), mongo (a
MongoDB stand-in: mongo-java-server from Maven Central, compiled with a
JDK; a real mongod cannot be installed here), kafka (the real broker:
Apache Kafka's jars from Maven Central, run on Java 17; "kafka@VERSION"
picks another version; the embedded default, kfake, needs nothing),
cassandra (Apache Cassandra 5.0's jars from Maven Central, run on Java 17;
report A3's experiment and the activities tests). The
lab starts and stops them itself; when nginx is missing it uses its built-in load balancer and
says so.`)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return parseError(err)
	}
	if len(pos) == 0 {
		fs.Usage()
		return 2
	}
	switch pos[0] {
	case "status":
		if _, v, err := deps.FindNginx(); err == nil {
			fmt.Fprintf(st.Stdout, "nginx  installed, %s\n", v)
		} else {
			fmt.Fprintf(st.Stdout, "nginx  missing (hlab deps install nginx); the lab falls back to its built-in load balancer\n")
		}
		if p, err := exec.LookPath("wrk"); err == nil {
			fmt.Fprintf(st.Stdout, "wrk    installed, %s\n", p)
		} else {
			fmt.Fprintf(st.Stdout, "wrk    missing (hlab deps install wrk); only the comparison script needs it\n")
		}
		if _, v, err := deps.FindRedis(); err == nil {
			fmt.Fprintf(st.Stdout, "redis  installed, %s\n", v)
		} else {
			fmt.Fprintf(st.Stdout, "redis  missing (hlab deps install redis); report B's benchmark skips Redis without it\n")
		}
		switch ms, err := deps.CheckMongo(); {
		case err != nil:
			fmt.Fprintf(st.Stdout, "mongo  unknown: %v\n", err)
		case ms.Ready():
			fmt.Fprintf(st.Stdout, "mongo  ready: %s in %s (a stand-in, not MongoDB)\n", deps.MongoStandInKind, ms.LibDir)
		case ms.JavaErr != nil:
			fmt.Fprintf(st.Stdout, "mongo  missing (hlab deps install mongo): %v\n", ms.JavaErr)
		default:
			fmt.Fprintf(st.Stdout, "mongo  not fetched yet (hlab deps install mongo, or the first start fetches %s)\n", deps.MongoStandInKind)
		}
		kafkaStatus(st)
		cassandraStatus(st)
		return 0
	case "install":
		names := pos[1:]
		if len(names) == 0 {
			names = []string{"nginx", "wrk"}
		}
		var apt []string
		mongo := false
		cassandra := false
		var kafkas []string // versions; "" = the default
		for _, n := range names {
			if v, ok := strings.CutPrefix(n, "kafka"); ok && (v == "" || v[0] == '@') {
				kafkas = append(kafkas, strings.TrimPrefix(v, "@"))
				continue
			}
			switch n {
			case "nginx", "wrk":
				apt = append(apt, n)
			case "redis":
				apt = append(apt, "redis-server")
			case "cassandra":
				cassandra = true
			case "mongo":
				mongo = true
			default:
				return fail(st, "deps", 2, fmt.Errorf("no installer for %q; known: nginx, wrk, redis, mongo, kafka, cassandra", n))
			}
		}
		if err := deps.AptInstall(st.Stderr, apt...); err != nil {
			return fail(st, "deps", 1, err)
		}
		if mongo {
			if err := deps.InstallMongo(context.Background(), st.Stderr); err != nil {
				return fail(st, "deps", 1, err)
			}
		}
		if cassandra {
			if err := deps.InstallCassandra(context.Background(), st.Stderr); err != nil {
				return fail(st, "deps", 1, err)
			}
		}
		for _, v := range kafkas {
			if err := deps.InstallKafka(context.Background(), st.Stderr, v); err != nil {
				return fail(st, "deps", 1, err)
			}
		}
		return 0
	case "up":
		if len(pos) == 2 {
			if v, ok := strings.CutPrefix(pos[1], "kafka"); ok && (v == "" || v[0] == '@') {
				return kafkaUp(st, strings.TrimPrefix(v, "@"))
			}
		}
		return fail(st, "deps", 2, fmt.Errorf("up %s: only kafka runs standalone (in the foreground: hlab deps up kafka); the lab starts and stops the others itself", strings.Join(pos[1:], " ")))
	case "down":
		return fail(st, "deps", 2, fmt.Errorf("%s: no dependency has a standalone mode yet; the lab starts and stops %s itself", pos[0], strings.Join(pos[1:], ", ")))
	}
	return fail(st, "deps", 2, fmt.Errorf("unknown action %q: use status or install", pos[0]))
}

// kafkaStatus prints what the real Kafka broker needs and has; kfake, the
// embedded default, is always there.
func kafkaStatus(st *State) {
	ks, err := deps.CheckKafka("")
	if err != nil {
		fmt.Fprintf(st.Stdout, "kafka  kfake (embedded, the default) ready; real broker unknown: %v\n", err)
		return
	}
	tools := "java missing"
	if ks.JavaErr == nil {
		tools = "java " + ks.JavaVersion
	}
	if ks.MavenErr == nil {
		tools += ", maven " + ks.MavenVer
	} else {
		tools += ", maven missing"
	}
	switch {
	case ks.Ready():
		fmt.Fprintf(st.Stdout, "kafka  kfake (embedded, the default) ready; real broker kafka %s ready: jars in %s (%.0f MB), %s\n", ks.Version, ks.LibDir, ks.SizeMB, tools)
	case ks.JavaErr != nil || (!ks.Cached && ks.MavenErr != nil):
		fmt.Fprintf(st.Stdout, "kafka  kfake (embedded, the default) ready; real broker kafka %s missing (hlab deps install kafka): %s\n", ks.Version, tools)
	default:
		fmt.Fprintf(st.Stdout, "kafka  kfake (embedded, the default) ready; real broker kafka %s not fetched yet (hlab deps install kafka, or the first start fetches it into %s), %s\n", ks.Version, ks.LibDir, tools)
	}
}

// cassandraStatus prints what the real Cassandra node needs and has.
func cassandraStatus(st *State) {
	cs, err := deps.CheckCassandra()
	switch {
	case err != nil:
		fmt.Fprintf(st.Stdout, "cassandra  unknown: %v\n", err)
	case cs.Ready():
		fmt.Fprintf(st.Stdout, "cassandra  %s ready: jars in %s (%.0f MB), java %s\n", deps.CassandraKind, cs.LibDir, cs.SizeMB, cs.JavaVersion)
	case cs.JavaErr != nil || (!cs.Cached && cs.MavenErr != nil):
		why := cs.JavaErr
		if why == nil {
			why = cs.MavenErr
		}
		fmt.Fprintf(st.Stdout, "cassandra  %s missing (hlab deps install cassandra): %v\n", deps.CassandraKind, why)
	default:
		fmt.Fprintf(st.Stdout, "cassandra  %s not fetched yet (hlab deps install cassandra, or the first start fetches it into %s)\n", deps.CassandraKind, cs.LibDir)
	}
}

// kafkaUp runs a real broker in the foreground for a user or a script
// (bench/databus.sh) that wants one outside the lab, until SIGINT or
// SIGTERM.
func kafkaUp(st *State, version string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sb, err := sandbox.New()
	if err != nil {
		return fail(st, "deps", 1, err)
	}
	defer sb.Close()
	k, err := deps.StartKafka(ctx, sb, deps.KafkaConfig{Kind: deps.KafkaReal, Version: version})
	if err != nil {
		return fail(st, "deps", 1, err)
	}
	// Kafka's own tools are not among the broker's jars: fetched beside
	// them, for kafka-producer-perf-test and the like.
	if lib, err := deps.FetchKafkaTools(ctx, version, nil); err != nil {
		fmt.Fprintf(st.Stderr, "hlab deps: kafka's tools (kafka-producer-perf-test) are not available: %v\n", err)
	} else {
		fmt.Fprintf(st.Stdout, "kafka tools: %s (java -cp '%s/*' %s is kafka-producer-perf-test.sh)\n", lib, lib, deps.ProducerPerfClass)
	}
	fmt.Fprintf(st.Stdout, "kafka up: brokers %s (%s; Ctrl-C stops it)\n", strings.Join(k.Brokers, ","), k.Kind)
	<-ctx.Done()
	if err := k.Stop(); err != nil {
		return fail(st, "deps", 1, err)
	}
	return 0
}
