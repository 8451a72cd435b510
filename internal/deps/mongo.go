package deps

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"

	"github.com/highload-lab/hlab/internal/defaults"
	"github.com/highload-lab/hlab/internal/sandbox"
)

// MongoDB runs here as a stand-in. A real mongod cannot be installed on
// the machines hlab is built for (it is not in Debian, and its download
// hosts are out of reach), so StartMongo runs mongo-java-server
// (de.bwaldvogel, from Maven Central) with its in-memory backend and its
// oplog enabled, through a small Java main kept in mongostub/ and
// compiled at first use. Everything that records an environment labels
// it "mongo-java-server 1.47.0 (MongoDB stand-in)".
//
// It speaks enough of the wire protocol for the Go driver v2.8 (it
// reports MongoDB 5.0, wire version 8; driver 2.9+ refuses it; connect
// with directConnection=true, as Mongo.URI does): finds, writes,
// collection change streams with fullDocument: updateLookup, and resuming
// with resumeAfter, startAfter or startAtOperationTime. Where it differs
// from MongoDB (code must follow MongoDB, not these):
//   - no database- or deployment-level change streams; no sessions or
//     transactions;
//   - no operationTime or $clusterTime in replies;
//   - a live stream gets a "drop" event (without ns) for a drop of any
//     collection of its database, and no invalidate after it; resuming
//     from before a drop of its own collection gets an invalidate;
//   - an update event's documentKey is the update's operators, not the
//     _id; a replace is reported as an update; an update whose document
//     is gone carries the update's $set fields as fullDocument, not null;
//   - an insert that fails (duplicate key) still shows as an insert event,
//     with the document that was refused;
//   - it ignores maxAwaitTimeMS: an idle getMore returns at once, and
//     each getMore scans the whole in-memory oplog, which is never
//     truncated (so ChangeStreamHistoryLost never happens);
//   - no durability: data lives in the JVM's heap and dies with it.

// MongoStandInVersion is the mongo-java-server the stand-in runs.
const MongoStandInVersion = "1.47.0"

// MongoStandInKind labels the stand-in in a run's environment record.
const MongoStandInKind = "mongo-java-server " + MongoStandInVersion + " (MongoDB stand-in)"

var (
	// ErrMongoNeedsJDK is returned by StartMongo, FetchMongo and
	// InstallMongo when java or javac (17 or newer) is missing: the stand-in
	// is a Java main compiled at first use.
	ErrMongoNeedsJDK = errors.New("deps: the MongoDB stand-in needs java and javac 17 or newer (install them with 'apt-get install -y openjdk-17-jdk-headless maven', or run 'make deps')")

	// ErrMongoNeedsMaven is returned by StartMongo and FetchMongo when the
	// stand-in's jars are not cached yet and no mvn is found to fetch them.
	ErrMongoNeedsMaven = errors.New("deps: maven is not installed, and it fetches the MongoDB stand-in's jars (install it with 'apt-get install -y openjdk-17-jdk-headless maven', or run 'make deps')")
)

//go:embed mongostub/MongoStandIn.java
var mongoStandInSource []byte

// MongoLibDir returns the directory holding the stand-in's jars
// (<CacheDir>/mongo-java-server-<version>/lib) and whether they are all
// there.
func MongoLibDir() (dir string, cached bool, err error) {
	return cachedLib("mongo-java-server-"+MongoStandInVersion, mongoMarkerJar)
}

const mongoMarkerJar = "mongo-java-server-core-" + MongoStandInVersion + ".jar"

// mongoClassesDir is where the stand-in's main is compiled to: named
// after the source's hash, so an edited source is compiled again.
func mongoClassesDir(lib string) string {
	sum := sha256.Sum256(mongoStandInSource)
	return filepath.Join(filepath.Dir(lib), "standin-"+hex.EncodeToString(sum[:6]))
}

// FetchMongo makes sure the stand-in can start without a download: its
// jars in the cache (fetched from Maven Central with mvn, about 3 MB,
// Maven's output to w; nil = discard) and its main compiled with javac.
// It returns the classpath to run it with. Concurrent calls, also from
// other processes, wait for each other.
func FetchMongo(ctx context.Context, w io.Writer) (classpath string, err error) {
	lib, _, err := MongoLibDir()
	if err != nil {
		return "", err
	}
	if _, err := fetchJars(ctx, jarSet{
		what: "mongo-java-server " + MongoStandInVersion, lib: lib,
		artifact: "mongo-standin-jars", version: MongoStandInVersion,
		jars: []mavenJar{
			{"de.bwaldvogel", "mongo-java-server-memory-backend", MongoStandInVersion},
			{"org.slf4j", "slf4j-simple", "2.0.17"},
		},
		marker: mongoMarkerJar, noMaven: ErrMongoNeedsMaven,
	}, w); err != nil {
		return "", err
	}
	classes := mongoClassesDir(lib)
	if err := compileMongoStandIn(ctx, lib, classes); err != nil {
		return "", err
	}
	return filepath.Join(lib, "*") + string(os.PathListSeparator) + classes, nil
}

// compileMongoStandIn compiles the embedded main into classes, once.
func compileMongoStandIn(ctx context.Context, lib, classes string) error {
	class := filepath.Join(classes, "MongoStandIn.class")
	if fileExists(class) {
		return nil
	}
	javac, err := exec.LookPath("javac")
	if err != nil {
		return ErrMongoNeedsJDK
	}
	unlock, err := lockFile(filepath.Join(filepath.Dir(lib), ".lock"))
	if err != nil {
		return err
	}
	defer unlock()
	if fileExists(class) { // compiled while we waited
		return nil
	}
	tmp := classes + ".tmp"
	os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return fmt.Errorf("deps: mongo stand-in: %w", err)
	}
	src := filepath.Join(tmp, "MongoStandIn.java")
	if err := os.WriteFile(src, mongoStandInSource, 0o644); err != nil {
		return fmt.Errorf("deps: mongo stand-in: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, javac, "--release", "17", "-nowarn",
		"-cp", filepath.Join(lib, "*"), "-d", tmp, src).CombinedOutput()
	if err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("deps: compiling the MongoDB stand-in with javac failed: %w: %s", err, lastLines(string(out), 8))
	}
	os.RemoveAll(classes)
	if err := os.Rename(tmp, classes); err != nil {
		return fmt.Errorf("deps: mongo stand-in: %w", err)
	}
	return nil
}

// MongoSetup says what the stand-in needs and has.
type MongoSetup struct {
	LibDir  string // where its jars are (or go)
	Cached  bool   // jars fetched and main compiled: it starts without a download
	Java    string // path of java; "" when missing
	JavaErr error  // why it cannot run: java or javac missing or too old
	Maven   string // path of mvn; "" when missing
}

// Ready reports whether the stand-in can start without installing or
// downloading anything.
func (s MongoSetup) Ready() bool { return s.Cached && s.JavaErr == nil }

// CheckMongo reports what the stand-in needs and has, without changing
// anything.
func CheckMongo() (MongoSetup, error) {
	var s MongoSetup
	var err error
	if s.LibDir, s.Cached, err = MongoLibDir(); err != nil {
		return s, err
	}
	s.Cached = s.Cached && fileExists(filepath.Join(mongoClassesDir(s.LibDir), "MongoStandIn.class"))
	s.Java, s.JavaErr = checkJDK()
	s.Maven, _ = exec.LookPath("mvn")
	return s, nil
}

// checkJDK checks for java and javac, 17 or newer (what the stand-in is
// compiled for), and returns the path of java.
func checkJDK() (java string, err error) {
	java, v, err := FindJava()
	if err != nil {
		return "", ErrMongoNeedsJDK
	}
	if _, err := exec.LookPath("javac"); err != nil {
		return "", ErrMongoNeedsJDK
	}
	if v != "unknown" && javaMajor(v) < 17 {
		return "", fmt.Errorf("deps: java %s is too old for the MongoDB stand-in, which needs 17 or newer (install 'openjdk-17-jdk-headless')", v)
	}
	return java, nil
}

// InstallMongo prepares the stand-in: it installs a JDK 17 and Maven from
// Debian's packages when javac or mvn is missing (that needs root and
// apt-get), fetches the jars and compiles the main. Progress goes to w.
// It is quick when everything is there.
func InstallMongo(ctx context.Context, w io.Writer) error {
	jdk := []aptTool{{"javac", "openjdk-17-jdk-headless"}, {"mvn", "maven"}}
	if err := installTools(ctx, w, "mongo", "a JDK and Maven", jdk); err != nil {
		return err
	}
	if _, err := checkJDK(); err != nil {
		return err
	}
	if s, err := CheckMongo(); err != nil || s.Cached {
		return err
	}
	fmt.Fprintf(w, "deps: fetching mongo-java-server %s (the MongoDB stand-in) from Maven Central and compiling its main\n", MongoStandInVersion)
	if _, err := FetchMongo(ctx, nil); err != nil {
		return err
	}
	lib, _, _ := MongoLibDir()
	fmt.Fprintf(w, "deps: MongoDB stand-in in %s (%.1f MB of jars)\n", filepath.Dir(lib), float64(dirSize(lib))/(1<<20))
	return nil
}

// MongoConfig is what StartMongo needs; the zero value works.
type MongoConfig struct {
	// Dir holds the stand-in's log (stdout.log). "" = a temporary
	// directory that Stop removes. Data is in memory only.
	Dir string
	// JVMConfig: the heap defaults to 512 MB; StartTimeout bounds the
	// wait for the first ping, 0 = 30 s (a first start that compiles the
	// main is not counted).
	JVMConfig
	// Port is the port to listen on; 0 = a free one.
	Port int
}

// Mongo is a running MongoDB stand-in on 127.0.0.1 (see the comment at
// the top of this file for what it is and how it differs from MongoDB).
type Mongo struct {
	// Kind labels what runs, for a run's environment record:
	// MongoStandInKind.
	Kind    string
	Version string // mongo-java-server's version
	StandIn bool   // always true: a real mongod is not available here
	Addr    string // 127.0.0.1:port
	// URI is a connection string for the Go driver v2.8:
	// mongodb://127.0.0.1:port/?directConnection=true
	URI string
	Dir string

	node *serverNode
}

// StartMongo fetches and compiles the stand-in if needed, starts it under
// sb and returns once it answers a ping. ctx bounds its life as with
// sandbox.Start, and the wait.
func StartMongo(ctx context.Context, sb *sandbox.Sandbox, cfg MongoConfig) (*Mongo, error) {
	if sb == nil {
		return nil, errors.New("deps: StartMongo needs a sandbox to run the stand-in in")
	}
	java, err := checkJDK()
	if err != nil {
		return nil, err
	}
	classpath, err := FetchMongo(ctx, cfg.Log)
	if err != nil {
		return nil, err
	}
	defaults.Positive(&cfg.StartTimeout, 30*time.Second)
	node, err := newServerNode(ctx, sb, "the mongo stand-in", cfg.Dir, "hlab-mongo-", nil, false, 10*time.Second, nil)
	if err != nil {
		return nil, err
	}
	m := &Mongo{Kind: MongoStandInKind, Version: MongoStandInVersion, StandIn: true, Dir: node.dir, node: node}
	node.await = func(ctx context.Context, exited <-chan struct{}) error {
		return awaitMongo(ctx, m.Addr, m.URI, cfg.StartTimeout, exited)
	}
	heap := cfg.heap(512)
	err = onPorts(ctx, cfg.Port, 1, func(ports []int) error {
		port := ports[0]
		node.spec = sandbox.Spec{
			Name: "mongo", Path: java, Dir: m.Dir,
			Args: []string{
				"-Xmx" + strconv.Itoa(heap) + "m", "-XX:+UseSerialGC", "-Djava.awt.headless=true",
				"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-Dorg.slf4j.simpleLogger.logFile=System.out",
				"-cp", classpath, "MongoStandIn", "127.0.0.1", strconv.Itoa(port),
			},
			CPU: cfg.CPU, MemoryMB: cfg.MemoryMB,
		}
		m.Addr = fmt.Sprintf("127.0.0.1:%d", port)
		m.URI = "mongodb://" + m.Addr + "/?directConnection=true"
		return node.startServer(ctx)
	})
	if err != nil {
		node.removeDir()
		return nil, err
	}
	return m, nil
}

// awaitMongo waits until the server at addr accepts connections, then
// pings it through the driver at uri; it gives up when ctx ends, timeout
// passes, or exited (when non-nil) is closed. Dialing first matters: a
// driver whose first contact failed checks again only every 500 ms.
func awaitMongo(ctx context.Context, addr, uri string, timeout time.Duration, exited <-chan struct{}) error {
	// One deadline for both waits.
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	await := func(ready func(ctx context.Context) error) error {
		return awaitReady(ctx, "the mongo stand-in at "+addr, "did not answer a ping", timeout, 20*time.Millisecond, exited, ready)
	}
	err := await(func(ctx context.Context) error {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			conn.Close()
		}
		return err
	})
	if err != nil {
		return err
	}
	client, err := mongo.Connect(options.Client().ApplyURI(uri).SetServerSelectionTimeout(time.Second).SetConnectTimeout(time.Second))
	if err != nil {
		return fmt.Errorf("deps: mongo client: %w", err)
	}
	defer client.Disconnect(context.WithoutCancel(ctx))
	return await(func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return client.Ping(ctx, readpref.Primary())
	})
}

// Proc returns the stand-in's process (nil after Stop).
func (m *Mongo) Proc() *sandbox.Process { return m.node.process() }

// Stop stops the stand-in (its data is gone with it) and removes a
// temporary Dir. It is idempotent.
func (m *Mongo) Stop() error { return m.node.stop(m.node.removeDir) }
