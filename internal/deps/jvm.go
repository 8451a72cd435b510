package deps

import (
	"fmt"
	"io"
	"time"
)

// JVMConfig is what the configs of the dependencies that run on the JVM
// (CassandraConfig, KafkaConfig's real broker, MongoConfig) share.
type JVMConfig struct {
	// HeapMB is the heap (-Xmx; Cassandra's -Xms too); 0 = the
	// dependency's default (Cassandra 1024, Kafka and Mongo 512), or half
	// of MemoryMB when that is smaller.
	HeapMB   int
	CPU      float64 // sandbox CPU quota (fraction of a core); 0 = none
	MemoryMB int     // sandbox memory limit; 0 = none
	// StartTimeout bounds the wait until the server answers (also after a
	// restart); 0 = the dependency's default, said in its config.
	// Fetching the jars is not counted.
	StartTimeout time.Duration
	// Log receives the progress of a jar download (Maven's output); nil =
	// discard.
	Log io.Writer
}

// heap returns the heap in MB: HeapMB when set, else def but at most half
// of MemoryMB when that limit is set.
func (c JVMConfig) heap(def int) int {
	if c.HeapMB > 0 {
		return c.HeapMB
	}
	if c.MemoryMB > 0 && c.MemoryMB/2 < def {
		return c.MemoryMB / 2
	}
	return def
}

// JVMSetup says what a dependency that runs on the JVM needs and has:
// its jars, Java, and Maven (which fetches the jars).
type JVMSetup struct {
	LibDir string // where its jars are (or go)
	Cached bool   // all jars are in LibDir
	SizeMB float64

	Java, JavaVersion string // path and version; "" when missing
	JavaErr           error  // why java is unusable (missing, too old)
	Maven, MavenVer   string // path and version; "" when missing
	MavenErr          error
}

// Ready reports whether the dependency can start without installing or
// downloading anything.
func (s JVMSetup) Ready() bool { return s.Cached && s.JavaErr == nil }

// checkJVMSetup reports what what ("kafka 3.9.2") needs and has, its jars
// in lib (cached: all there), running on java minJava or newer.
func checkJVMSetup(lib string, cached bool, minJava int, what string) JVMSetup {
	s := JVMSetup{LibDir: lib, Cached: cached}
	if s.Cached {
		s.SizeMB = float64(dirSize(s.LibDir)) / (1 << 20)
	}
	s.Java, s.JavaVersion, s.JavaErr = FindJava()
	if s.JavaErr == nil {
		s.JavaErr = checkJava(s.JavaVersion, minJava, what)
	}
	s.Maven, s.MavenVer, s.MavenErr = FindMaven()
	return s
}

// checkJava says when java version v is older than minimum, which what
// ("kafka 3.9.2") needs.
func checkJava(v string, minimum int, what string) error {
	if v == "unknown" || javaMajor(v) >= minimum {
		return nil
	}
	return fmt.Errorf("deps: java %s is too old for %s, which needs %d or newer (install it with 'apt-get install -y openjdk-17-jre-headless')", v, what, minimum)
}
