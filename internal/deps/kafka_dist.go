package deps

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/template"
)

// DefaultKafkaVersion is the Kafka the real broker runs unless
// KafkaConfig.Version says otherwise. 3.9 rather than 4.x: it is the
// release line whose KRaft mode is complete and whose native single-node
// setup is the static quorum used here (4.x prefers a dynamic quorum
// formatted with --standalone); classic consumer groups, what the
// reports' clients used, are its default; it logs through reload4j with
// one properties file; and it takes ~20 MB less memory than 4.3.1
// (~300 MB against ~325 MB at -Xmx512m, measured here). 4.3.1 runs too
// (KafkaConfig.Version, hlab deps install kafka@4.3.1), for KIP-848
// consumer groups and share groups, which kfake also speaks.
const DefaultKafkaVersion = "3.9.2"

// kafkaDist is what differs between the Kafka versions the real broker
// can run: the slf4j binding fetched beside the broker, how its logging is
// configured, and the oldest Java it runs on.
type kafkaDist struct {
	logging   mavenJar // the slf4j binding
	logConf   *template.Template
	logFile   string // name of the rendered logging config in the broker's Dir
	logFlag   string // JVM flag naming the logging config, followed by its path
	minJava   int
	shareConf bool // has share groups, whose state topic needs replication factor 1 too
}

var kafkaDists = map[string]kafkaDist{
	"3.9.2": {
		logging: mavenJar{"org.slf4j", "slf4j-reload4j", "1.7.36"},
		logConf: template.Must(template.New("log4j").Parse(`log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File={{.}}/server.log
log4j.appender.file.Append=true
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.state.change.logger=WARN
log4j.logger.org.apache.kafka.controller=INFO
`)),
		logFile: "log4j.properties",
		logFlag: "-Dlog4j.configuration=file:",
		minJava: 11,
	},
	"4.3.1": {
		logging: mavenJar{"org.apache.logging.log4j", "log4j-slf4j-impl", "2.25.4"},
		logConf: template.Must(template.New("log4j2").Parse(`status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {{.}}/server.log
appender.file.append = true
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.file.ref = file
logger.request.name = kafka.request.logger
logger.request.level = warn
logger.state.name = state.change.logger
logger.state.level = warn
`)),
		logFile:   "log4j2.properties",
		logFlag:   "-Dlog4j2.configurationFile=",
		minJava:   17,
		shareConf: true,
	},
}

// KafkaVersions returns the Kafka versions the real broker can run.
func KafkaVersions() []string {
	vs := make([]string, 0, len(kafkaDists))
	for v := range kafkaDists {
		vs = append(vs, v)
	}
	slices.Sort(vs)
	return vs
}

func kafkaDistFor(version string) (string, kafkaDist, error) {
	if version == "" {
		version = DefaultKafkaVersion
	}
	d, ok := kafkaDists[version]
	if !ok {
		return "", d, fmt.Errorf("deps: kafka %q is not one the real broker can run; known: %s", version, strings.Join(KafkaVersions(), ", "))
	}
	return version, d, nil
}

// CacheDir returns where downloaded dependencies are kept: $HLAB_CACHE,
// else hlab/ in the user's cache directory ($XDG_CACHE_HOME or
// ~/.cache).
func CacheDir() (string, error) {
	if d := os.Getenv("HLAB_CACHE"); d != "" {
		return filepath.Abs(d)
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("deps: no cache directory (set HLAB_CACHE): %w", err)
	}
	return filepath.Join(d, "hlab"), nil
}

// KafkaLibDir returns the directory holding the jars of a Kafka version
// (<CacheDir>/kafka-<version>/lib; "" = DefaultKafkaVersion) and whether
// they are all there.
func KafkaLibDir(version string) (dir string, cached bool, err error) {
	return brokerJars.libDir(version)
}

// FetchKafka makes sure the jars of a Kafka version ("" =
// DefaultKafkaVersion) are in the cache and returns their directory. When
// they are not, it downloads them from Maven Central with mvn (about
// 45 MB; Maven's own repository is kept in <CacheDir>/m2), writing Maven's
// output to w (nil = discard). Concurrent fetches, also from other
// processes, wait for each other.
func FetchKafka(ctx context.Context, version string, w io.Writer) (string, error) {
	return brokerJars.fetch(ctx, version, w)
}

// kafkaJars is a set of jars of a Kafka version: an artifact of
// org.apache.kafka with its runtime dependencies and the version's slf4j
// binding, kept in <CacheDir>/<dir>-<version>/lib.
type kafkaJars struct {
	what     string // for messages: "kafka"
	dir      string
	artifact string // org.apache.kafka's artifactId, whose jar marks the set whole
	pom      string // the artifactId of the pom that fetches them
}

var brokerJars = kafkaJars{what: "kafka", dir: "kafka", artifact: "kafka_2.13", pom: "kafka-broker-jars"}

func (j kafkaJars) libDir(version string) (dir string, cached bool, err error) {
	version, _, err = kafkaDistFor(version)
	if err != nil {
		return "", false, err
	}
	return cachedLib(j.dir+"-"+version, j.artifact+"-"+version+".jar")
}

func (j kafkaJars) fetch(ctx context.Context, version string, w io.Writer) (string, error) {
	version, dist, err := kafkaDistFor(version)
	if err != nil {
		return "", err
	}
	lib, cached, err := j.libDir(version)
	if err != nil || cached {
		return lib, err
	}
	return fetchJars(ctx, jarSet{
		what: j.what + " " + version, lib: lib,
		artifact: j.pom, version: version,
		jars:   []mavenJar{{"org.apache.kafka", j.artifact, version}, dist.logging},
		marker: j.artifact + "-" + version + ".jar", noMaven: ErrMavenNotInstalled,
	}, w)
}

// lockFile takes an exclusive lock on path (created if missing), waiting
// for other holders, also in other processes.
func lockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("deps: lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("deps: lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil // closing releases the lock
}

// FindJava returns the path of java and its version (e.g. "17.0.15").
func FindJava() (path, version string, err error) {
	return program{
		name: "java", missing: ErrJavaNotInstalled,
		// java -version prints `openjdk version "17.0.15" 2025-04-15` on stderr.
		versionArgs: []string{"-version"}, version: regexp.MustCompile(`version "([^"]+)"`),
	}.find()
}

// javaMajor returns the major version of a java version string: 17 for
// "17.0.15", 8 for "1.8.0_292", 0 when it cannot tell.
func javaMajor(v string) int {
	v = strings.TrimPrefix(v, "1.")
	digits := strings.FieldsFunc(v, func(r rune) bool { return r < '0' || r > '9' })
	if len(digits) == 0 {
		return 0
	}
	n, _ := strconv.Atoi(digits[0])
	return n
}

// FindMaven returns the path of mvn and its version (e.g. "3.8.7").
func FindMaven() (path, version string, err error) {
	return program{
		name: "mvn", missing: ErrMavenNotInstalled,
		versionArgs: []string{"-v", "-B"}, version: regexp.MustCompile(`Apache Maven (\S+)`),
	}.find()
}

// KafkaSetup says what the real broker of a Kafka version needs and has.
type KafkaSetup struct {
	Version string
	JVMSetup
}

// CheckKafka reports what the real broker of version ("" =
// DefaultKafkaVersion) needs and has, without changing anything.
func CheckKafka(version string) (KafkaSetup, error) {
	version, dist, err := kafkaDistFor(version)
	if err != nil {
		return KafkaSetup{}, err
	}
	lib, cached, err := KafkaLibDir(version)
	if err != nil {
		return KafkaSetup{Version: version}, err
	}
	return KafkaSetup{version, checkJVMSetup(lib, cached, dist.minJava, "kafka "+version)}, nil
}

// InstallKafka prepares the real broker of version ("" =
// DefaultKafkaVersion): it installs Java 17 and Maven from Debian's
// packages when java or mvn is missing (that needs root and apt-get), then
// fetches the jars into the cache. Progress goes to w. It is quick when
// everything is there.
func InstallKafka(ctx context.Context, w io.Writer, version string) error {
	if err := installTools(ctx, w, "kafka", "Java and Maven", javaTools); err != nil {
		return err
	}
	if _, cached, err := KafkaLibDir(version); err != nil || cached {
		return err
	}
	return fetchJarsSaying(w, "kafka "+orDefault(version, DefaultKafkaVersion), func() (string, error) { return FetchKafka(ctx, version, nil) })
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// dirSize returns the bytes of the regular files directly in dir.
func dirSize(dir string) int64 {
	es, _ := os.ReadDir(dir)
	var n int64
	for _, e := range es {
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
	}
	return n
}

// lastLines returns the last n non-empty lines of s, joined with " | ".
func lastLines(s string, n int) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(stripANSI(l)); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

var ansi = regexp.MustCompile(`\x1b\[[0-9;]*m`)

func stripANSI(s string) string { return ansi.ReplaceAllString(s, "") }
