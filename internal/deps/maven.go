package deps

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"text/template"
)

// jarSet is a set of runtime jars that mvn copies from Maven Central into
// the cache: the Kafka broker's (FetchKafka), the MongoDB stand-in's
// (FetchMongo).
type jarSet struct {
	what string // e.g. "kafka 3.9.2", for messages
	// lib is <CacheDir>/<name>/lib. It appears, by rename, only once mvn
	// has copied every jar; pom.xml and the fetch's .lock sit beside it,
	// and Maven's own repository is shared by every set in <CacheDir>/m2.
	lib string
	// The pom's artifactId and version (lab.highload:kafka-broker-jars:3.9.2),
	// and its dependencies, whose runtime jars are the set.
	artifact, version string
	jars              []mavenJar
	marker            string // a jar of the set, checked for in lib after the copy
	noMaven           error  // returned when mvn is needed and missing
}

// mavenJar is a Maven artifact: groupId, artifactId, version.
type mavenJar struct{ Group, Artifact, Version string }

// jarSetPom is the pom of a jarSet.
var jarSetPom = template.Must(template.New("pom").Parse(`<?xml version="1.0" encoding="UTF-8"?>
<!-- Written by hlab: the runtime jars of {{.What}}. -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>lab.highload</groupId>
  <artifactId>{{.Artifact}}</artifactId>
  <version>{{.Version}}</version>
  <packaging>pom</packaging>
  <dependencies>
{{- range .Jars}}
    <dependency><groupId>{{.Group}}</groupId><artifactId>{{.Artifact}}</artifactId><version>{{.Version}}</version></dependency>
{{- end}}
  </dependencies>
</project>
`))

// cachedLib returns the lib directory of the jar set name
// (<CacheDir>/<name>/lib) and whether its jars are all there: marker, one
// of them, is, as the directory appears, by rename, only once mvn has
// copied every jar.
func cachedLib(name, marker string) (lib string, cached bool, err error) {
	cache, err := CacheDir()
	if err != nil {
		return "", false, err
	}
	lib = filepath.Join(cache, name, "lib")
	return lib, fileExists(filepath.Join(lib, marker)), nil
}

// fetchJars makes sure js is in the cache and returns its lib directory,
// downloading it with mvn when it is not, with Maven's output to w (nil =
// discard). Concurrent fetches, also from other processes, wait for each
// other.
func fetchJars(ctx context.Context, js jarSet, w io.Writer) (string, error) {
	lib := js.lib
	if fileExists(filepath.Join(lib, js.marker)) {
		return lib, nil
	}
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		return "", js.noMaven
	}
	dir := filepath.Dir(lib)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("deps: %s cache: %w", js.what, err)
	}
	unlock, err := lockFile(filepath.Join(dir, ".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if fileExists(filepath.Join(lib, js.marker)) { // fetched while we waited
		return lib, nil
	}
	var pom bytes.Buffer
	if err := jarSetPom.Execute(&pom, struct {
		What, Artifact, Version string
		Jars                    []mavenJar
	}{js.what, js.artifact, js.version, js.jars}); err != nil {
		return "", err
	}
	pomPath := filepath.Join(dir, "pom.xml")
	if err := os.WriteFile(pomPath, pom.Bytes(), 0o644); err != nil {
		return "", fmt.Errorf("deps: %s cache: %w", js.what, err)
	}
	tmp := lib + ".tmp"
	os.RemoveAll(tmp)
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, mvn, "-q", "-B", "-f", pomPath,
		"-Dmaven.repo.local="+filepath.Join(filepath.Dir(dir), "m2"),
		"dependency:copy-dependencies", "-DoutputDirectory="+tmp, "-DincludeScope=runtime")
	cmd.Stdout, cmd.Stderr = &out, &out
	if w != nil {
		cmd.Stdout = io.MultiWriter(&out, w)
		cmd.Stderr = cmd.Stdout
	}
	if err := cmd.Run(); err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("deps: fetching the %s jars from Maven Central with mvn failed (%w); is Maven Central reachable? %s", js.what, err, lastLines(out.String(), 8))
	}
	if !fileExists(filepath.Join(tmp, js.marker)) {
		return "", fmt.Errorf("deps: mvn ran but left no %s in %s: %s", js.marker, tmp, lastLines(out.String(), 8))
	}
	if err := os.Rename(tmp, lib); err != nil {
		return "", fmt.Errorf("deps: %s cache: %w", js.what, err)
	}
	return lib, nil
}
