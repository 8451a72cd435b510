package gateway_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	databusv1 "github.com/highload-lab/hlab/api/databus/v1"
	"github.com/highload-lab/hlab/databus"
	"github.com/highload-lab/hlab/internal/gateway"
	"github.com/highload-lab/hlab/internal/gateway/gatewaytest"
	"github.com/highload-lab/hlab/internal/sandbox"
	"github.com/highload-lab/hlab/internal/testcerts"
	"github.com/highload-lab/hlab/internal/testkit"
)

// tokenGateway starts an echo gateway that requires tok (publish=*) and
// returns its address.
func tokenGateway(t *testing.T, cfg gateway.Config, tok string) string {
	t.Helper()
	cfg.Echo = true
	return tokensGateway(t, cfg, tok+" publish=* subscribe=* groups=*\n")
}

// TestMetadataBoundedBeforeTheTokenCheck: a client without a token sends
// 770 KiB of metadata, by hand, past what a gRPC client would send.
// The gateway must refuse the headers for their size, not decode them
// whole and then find no token.
func TestMetadataBoundedBeforeTheTokenCheck(t *testing.T) {
	addr := tokenGateway(t, gateway.Config{}, "tok")
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	fr.WriteSettings()
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", databusv1.DataBus_Publish_FullMethodName},
		{":authority", addr}, {"content-type", "application/grpc"}, {"te", "trailers"}, {gateway.MDTopic, "orders"}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	for i := range 64 {
		enc.WriteField(hpack.HeaderField{Name: "x-pad-" + string(rune('a'+i%26)) + strings.Repeat("x", i), Value: strings.Repeat("p", 16<<10), Sensitive: true})
	}
	// One HEADERS frame and CONTINUATIONs of the server's frame size.
	b := block.Bytes()
	const chunk = 16 << 10
	first := b[:min(chunk, len(b))]
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: first, EndHeaders: len(b) <= chunk}); err != nil {
		t.Fatal(err)
	}
	for rest := b[len(first):]; len(rest) > 0; {
		k := min(chunk, len(rest))
		if err := fr.WriteContinuation(1, k == len(rest), rest[:k]); err != nil {
			t.Logf("the gateway stopped reading the headers part way: %v", err)
			break
		}
		rest = rest[k:]
	}
	t.Logf("sent %d KiB of headers", len(b)>>10)
	dec := hpack.NewDecoder(4096, nil)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Logf("connection ended: %v", err)
			return // refused: the connection dropped, not decoded into a stream
		}
		switch f := f.(type) {
		case *http2.RSTStreamFrame:
			t.Logf("refused with RST_STREAM %v", f.ErrCode)
			return
		case *http2.GoAwayFrame:
			t.Logf("refused with GOAWAY %v", f.ErrCode)
			return
		case *http2.HeadersFrame:
			fields, _ := dec.DecodeFull(f.HeaderBlockFragment())
			for _, hf := range fields {
				if hf.Name == "grpc-status" && hf.Value == "16" {
					t.Fatal("the gateway decoded the whole 770 KiB of headers and only then refused the stream for its token (Unauthenticated)")
				}
			}
		}
	}
}

// TestHealthWatchNeedsAToken: with tokens, Check stays open (it tells
// only whether the gateway serves); Watch, which holds a stream, needs a
// token.
func TestHealthWatchNeedsAToken(t *testing.T) {
	addr := tokenGateway(t, gateway.Config{}, "tok")
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	health := healthpb.NewHealthClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := health.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("Check without a token: %v; want it open", err)
	}
	w, err := health.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err == nil {
		_, err = w.Recv()
	}
	if status.Code(err) != codes.Unauthenticated {
		t.Errorf("Watch without a token: %v; want Unauthenticated", err)
	}
	w, err = health.Watch(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer tok"), &healthpb.HealthCheckRequest{})
	if err == nil {
		_, err = w.Recv()
	}
	if err != nil {
		t.Errorf("Watch with a token: %v; want the status", err)
	}
}

// TestHealthWatchesBounded: Watch streams count against --max-streams,
// as the databus streams do.
func TestHealthWatchesBounded(t *testing.T) {
	addr := gatewaytest.Start(t, gateway.Config{Echo: true, MaxStreams: 2}, gateway.ServerOptions{})
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	watch := func() error {
		w, err := healthpb.NewHealthClient(conn).Watch(ctx, &healthpb.HealthCheckRequest{})
		if err == nil {
			_, err = w.Recv()
		}
		return err
	}
	for i := range 2 {
		if err := watch(); err != nil {
			t.Fatalf("Watch %d: %v", i+1, err)
		}
	}
	if err := watch(); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a third Watch with --max-streams 2: %v; want ResourceExhausted", err)
	}
}

// TestSilentConnectionClosed: a connection that never sends the HTTP/2
// preface (nor, with TLS, a handshake) is closed within the handshake
// timeout, not held for gRPC's default two minutes.
func TestSilentConnectionClosed(t *testing.T) {
	addr := gatewaytest.Start(t, gateway.Config{Echo: true}, gateway.ServerOptions{})
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, err = io.Copy(io.Discard, conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("a silent connection still open after %v", time.Since(start).Round(time.Second))
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("a silent connection closed after %v; want within the handshake timeout (10 s)", d.Round(time.Second))
	}
}

// TestTokensFileOthersCanRead: a tokens file others can read is refused
// at start, with what to do.
func TestTokensFileOthersCanRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte("tok publish=*\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := (gateway.AuthFiles{Tokens: path}).Load(); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a tokens file of mode 0644: %v; want it refused, saying chmod 600", err)
	}
}

// TestTokensReloadOnChange: the gateway takes a new tokens file without a
// restart: a token removed is refused and a token added accepted, on new
// streams, once the file changes.
func TestTokensReloadOnChange(t *testing.T) {
	dir := t.TempDir()
	path := testcerts.WriteFile(t, dir, "tokens", "old-token publish=*\n")
	auth, err := gateway.AuthFiles{Tokens: path}.Load()
	if err != nil {
		t.Fatal(err)
	}
	addr := gatewaytest.Start(t, gateway.Config{Echo: true}, gateway.ServerOptions{Auth: auth})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go auth.Watch(ctx, nil, 50*time.Millisecond, prometheus.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	old := dial(t, addr, databus.WithToken("old-token"), databus.WithPlaintextToken())
	renewed := dial(t, addr, databus.WithToken("new-token"), databus.WithPlaintextToken())
	if err := publishOnce(t, old, "orders"); err != nil {
		t.Fatalf("the file's token: %v", err)
	}
	// Replaced as a deploy does it: written aside, renamed over.
	next := testcerts.WriteFile(t, dir, "tokens.next", "new-token publish=*\n")
	if err := os.Rename(next, path); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the new file in force", func() bool {
		return status.Code(publishOnce(t, old, "orders")) == codes.Unauthenticated && publishOnce(t, renewed, "orders") == nil
	})
	// A file that does not parse keeps the last good one.
	if err := os.WriteFile(path, []byte("garbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if err := publishOnce(t, renewed, "orders"); err != nil {
		t.Errorf("after a broken file: %v; want the last good tokens in force", err)
	}
}

// TestCertificateReloadOnSIGHUP: "hlab serve databus" serving TLS takes a
// rotated certificate on SIGHUP: new connections get it.
func TestCertificateReloadOnSIGHUP(t *testing.T) {
	bin := testkit.HlabBinary(t)
	sb, err := sandbox.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	dir := t.TempDir()
	oldCA := testcerts.NewCA(t, "old CA")
	certFile, keyFile := oldCA.Server(t, "127.0.0.1").WriteFiles(t, dir, "server")
	grpcAddr := testkit.FreeAddr(t)
	g := serve(t, sb, bin, "databus", 0, "--grpc-addr", grpcAddr, "--echo", "--tls-cert", certFile, "--tls-key", keyFile)
	trusting := func(ca *testcerts.CA) error {
		c := dial(t, grpcAddr, databus.WithTLS(&tls.Config{RootCAs: ca.Pool()}))
		return publishOnce(t, c, "orders")
	}
	if err := trusting(oldCA); err != nil {
		t.Fatalf("a client of the old CA before the rotation: %v", err)
	}
	newCA := testcerts.NewCA(t, "new CA")
	newCA.Server(t, "127.0.0.1").WriteFiles(t, dir, "server")
	if err := syscall.Kill(g.pid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the new certificate served", func() bool { return trusting(newCA) == nil })
	if err := trusting(oldCA); err == nil {
		t.Error("a client that trusts only the old CA still connects after the rotation")
	}
}
