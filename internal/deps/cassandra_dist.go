package deps

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/template"
)

// CassandraVersion is the Cassandra the real node runs: the 5.0 line,
// which officially supports Java 17.
const CassandraVersion = "5.0.9"

// CassandraKind labels the node in a run's environment record.
const CassandraKind = "cassandra " + CassandraVersion

// Cassandra40Version is the 4.0 line's last release: report A3's
// Cassandra was the bitnami 4.0 image. It runs on Java 17 with the JVM
// flags of 5.0 and a few more --add-opens (cassandra40JVM), though the
// 4.0 line itself supports Java 8 and 11 only (CassandraConfig.Version).
const Cassandra40Version = "4.0.17"

var (
	// ErrCassandraNeedsJava is returned by StartCassandra and
	// InstallCassandra when no java 17 or newer is found.
	ErrCassandraNeedsJava = errors.New("deps: cassandra " + CassandraVersion + " needs java 17 or newer (install it with 'apt-get install -y openjdk-17-jre-headless maven', or run 'make deps')")

	// ErrCassandraNeedsMaven is returned by StartCassandra and
	// FetchCassandra when the jars are not cached yet and no mvn is found
	// to fetch them.
	ErrCassandraNeedsMaven = errors.New("deps: maven is not installed, and it fetches the Cassandra jars (install it with 'apt-get install -y openjdk-17-jre-headless maven', or run 'make deps')")

	// ErrCassandraStopped is returned by Cassandra.StartServer after
	// Cassandra.Stop.
	ErrCassandraStopped = errors.New("deps: cassandra was stopped")
)

// CassandraLibDir returns the directory holding the node's jars
// (<CacheDir>/cassandra-<version>/lib) and whether they are all there.
func CassandraLibDir() (dir string, cached bool, err error) {
	return cassandraLibDir(CassandraVersion)
}

func cassandraLibDir(version string) (dir string, cached bool, err error) {
	return cachedLib("cassandra-"+version, "cassandra-all-"+version+".jar")
}

// FetchCassandra makes sure the node's jars are in the cache and returns
// their directory. When they are not, it downloads them from Maven
// Central with mvn (about 67 MB; Maven's own repository is shared with
// the other jar sets in <CacheDir>/m2), writing Maven's output to w (nil
// = discard). Concurrent fetches, also from other processes, wait for
// each other.
func FetchCassandra(ctx context.Context, w io.Writer) (string, error) {
	return fetchCassandra(ctx, CassandraVersion, w)
}

// fetchCassandra is FetchCassandra for a version of Cassandra's.
func fetchCassandra(ctx context.Context, version string, w io.Writer) (string, error) {
	lib, cached, err := cassandraLibDir(version)
	if err != nil || cached {
		return lib, err
	}
	return fetchJars(ctx, jarSet{
		what: "cassandra " + version, lib: lib,
		artifact: "cassandra-node-jars", version: version,
		jars:   []mavenJar{{"org.apache.cassandra", "cassandra-all", version}},
		marker: "cassandra-all-" + version + ".jar", noMaven: ErrCassandraNeedsMaven,
	}, w)
}

// CassandraSetup says what the node needs and has.
type CassandraSetup struct{ JVMSetup }

// CheckCassandra reports what the node needs and has, without changing
// anything.
func CheckCassandra() (CassandraSetup, error) {
	lib, cached, err := CassandraLibDir()
	if err != nil {
		return CassandraSetup{JVMSetup{LibDir: lib}}, err
	}
	s := CassandraSetup{checkJVMSetup(lib, cached, 17, CassandraKind)}
	if s.Java == "" {
		s.JavaErr = ErrCassandraNeedsJava
	}
	return s, nil
}

// InstallCassandra prepares the node: it installs Java 17 and Maven from
// Debian's packages when java or mvn is missing (that needs root and
// apt-get), then fetches the jars into the cache, 5.0's and 4.0's (report
// A3's line). Progress goes to w. It is quick when everything is there.
func InstallCassandra(ctx context.Context, w io.Writer) error {
	if err := installTools(ctx, w, "cassandra", "Java and Maven", javaTools); err != nil {
		return err
	}
	s, err := CheckCassandra()
	if err != nil {
		return err
	}
	if s.JavaErr != nil {
		return s.JavaErr
	}
	for _, v := range []string{CassandraVersion, Cassandra40Version} {
		if _, cached, err := cassandraLibDir(v); err != nil || cached {
			continue
		}
		if err := fetchJarsSaying(w, "cassandra "+v, func() (string, error) { return fetchCassandra(ctx, v, nil) }); err != nil {
			return err
		}
	}
	return nil
}

// cassandraJVM are the JVM flags the node runs with: those of Cassandra
// 5.0's own conf/jvm17-server.options (G1, JPMS exports and opens, netty),
// and the general ones of conf/jvm-server.options that apply to Java 17.
// Left out: -XX:+AlwaysPreTouch (it faults in the whole heap at start,
// seconds under a 1-CPU quota, for no effect on a short run),
// -XX:+UseNUMA (one socket here) and -XX:+HeapDumpOnOutOfMemoryError (a
// 1 GB dump in the temp dir); -XX:+ExitOnOutOfMemoryError is added, as
// Cassandra's startup checks ask.
var cassandraJVM = []string{
	// jvm-server.options
	"-ea", "-da:net.openhft...", // Cassandra ships with assertions on
	"-XX:+UseThreadPriorities",
	"-Xss256k",
	"-XX:+UseTLAB", "-XX:+ResizeTLAB",
	"-XX:+PerfDisableSharedMem",
	"-Djava.net.preferIPv4Stack=true",
	"-XX:+ExitOnOutOfMemoryError",
	// jvm17-server.options: G1
	"-XX:+UseG1GC",
	"-XX:+ParallelRefProcEnabled",
	"-XX:MaxTenuringThreshold=1",
	"-XX:G1HeapRegionSize=16m",
	"-XX:G1RSetUpdatingPauseTimePercent=5",
	"-XX:MaxGCPauseMillis=300",
	"-XX:InitiatingHeapOccupancyPercent=70",
	// jvm17-server.options: JPMS
	"-Djdk.attach.allowAttachSelf=true",
	"--add-exports", "java.base/jdk.internal.misc=ALL-UNNAMED",
	"--add-exports", "java.management.rmi/com.sun.jmx.remote.internal.rmi=ALL-UNNAMED",
	"--add-exports", "java.rmi/sun.rmi.registry=ALL-UNNAMED",
	"--add-exports", "java.rmi/sun.rmi.server=ALL-UNNAMED",
	"--add-exports", "java.sql/java.sql=ALL-UNNAMED",
	"--add-exports", "java.base/java.lang.ref=ALL-UNNAMED",
	"--add-exports", "jdk.unsupported/sun.misc=ALL-UNNAMED",
	"--add-exports", "jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED",
	"--add-exports", "jdk.attach/sun.tools.attach=ALL-UNNAMED",
	"--add-opens", "java.base/java.lang.module=ALL-UNNAMED",
	"--add-opens", "java.base/jdk.internal.loader=ALL-UNNAMED",
	"--add-opens", "java.base/jdk.internal.ref=ALL-UNNAMED",
	"--add-opens", "java.base/jdk.internal.reflect=ALL-UNNAMED",
	"--add-opens", "java.base/jdk.internal.math=ALL-UNNAMED",
	"--add-opens", "java.base/jdk.internal.module=ALL-UNNAMED",
	"--add-opens", "java.base/jdk.internal.util.jar=ALL-UNNAMED",
	"--add-opens", "jdk.management/com.sun.management.internal=ALL-UNNAMED",
	"--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
	"--add-opens", "java.base/java.io=ALL-UNNAMED",
	"--add-opens", "java.base/java.lang.reflect=ALL-UNNAMED",
	"--add-opens", "jdk.compiler/com.sun.tools.javac=ALL-UNNAMED",
	"--add-opens", "java.base/java.lang=ALL-UNNAMED",
	"--add-opens", "java.base/java.util=ALL-UNNAMED",
	"--add-opens", "java.base/java.nio=ALL-UNNAMED", // in the file on later branches; harmless on 5.0
	// jvm17-server.options: netty
	"-Dio.netty.tryReflectionSetAccessible=true",
	"-Dio.netty.allocator.useCacheForAllThreads=true",
	"-Dio.netty.allocator.maxOrder=11",
}

// cassandra40JVM are the flags Cassandra 4.0 needs on Java 17 beyond
// cassandraJVM: its start-up reflects into these packages (without them:
// InaccessibleObjectException on ConcurrentSkipListMap.comparator).
var cassandra40JVM = []string{
	"--add-opens", "java.base/java.util.concurrent=ALL-UNNAMED",
	"--add-opens", "java.base/java.util.concurrent.atomic=ALL-UNNAMED",
	"--add-opens", "java.base/java.nio.file=ALL-UNNAMED",
	"--add-opens", "java.base/java.net=ALL-UNNAMED",
}

// cassandraYAML is a single node on 127.0.0.1 that owns the whole ring
// (no bootstrap), seeded by itself. Settings (its tokens, commitlog_sync
// and the authenticator among them) are rendered last, in key order.
var cassandraYAML = template.Must(template.New("cassandra.yaml").Parse(`# Written by hlab: a single Cassandra node on 127.0.0.1.
cluster_name: hlab
auto_bootstrap: false
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
endpoint_snitch: SimpleSnitch
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: "127.0.0.1:{{.StoragePort}}"
listen_address: 127.0.0.1
rpc_address: 127.0.0.1
storage_port: {{.StoragePort}}
native_transport_port: {{.NativePort}}
start_native_transport: true
data_file_directories:
  - {{.Dir}}/data
commitlog_directory: {{.Dir}}/commitlog
hints_directory: {{.Dir}}/hints
saved_caches_directory: {{.Dir}}/saved_caches
cdc_raw_directory: {{.Dir}}/cdc_raw
{{range .Settings}}{{.}}
{{end}}`))

// cassandraLogback logs INFO and up to system.log, and warnings and
// errors to the console (the process's stdout.log as well).
var cassandraLogback = template.Must(template.New("logback.xml").Parse(`<!-- Written by hlab. -->
<configuration scan="false">
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>{{.}}/system.log</file>
    <append>true</append>
    <encoder><pattern>%-5level [%thread] %date{ISO8601} %F:%L - %msg%n</pattern></encoder>
  </appender>
  <appender name="STDOUT" class="ch.qos.logback.core.ConsoleAppender">
    <filter class="ch.qos.logback.classic.filter.ThresholdFilter"><level>WARN</level></filter>
    <encoder><pattern>%-5level [%thread] %date{ISO8601} %F:%L - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO">
    <appender-ref ref="FILE"/>
    <appender-ref ref="STDOUT"/>
  </root>
</configuration>
`))

// RenderCassandraYAML returns the cassandra.yaml of a single node keeping
// its files under dir, listening for CQL on nativePort and for (its own)
// gossip on storagePort, with settings (yaml key -> value) appended.
func RenderCassandraYAML(dir string, nativePort, storagePort int, settings map[string]string) ([]byte, error) {
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	lines := make([]string, 0, len(keys))
	for _, k := range keys {
		if strings.ContainsAny(k, ":\n") || strings.Contains(settings[k], "\n") {
			return nil, fmt.Errorf("deps: cassandra setting %q: want a plain key and a one-line value", k)
		}
		lines = append(lines, k+": "+settings[k])
	}
	var buf bytes.Buffer
	err := cassandraYAML.Execute(&buf, struct {
		Dir                     string
		NativePort, StoragePort int
		Settings                []string
	}{dir, nativePort, storagePort, lines})
	return buf.Bytes(), err
}
