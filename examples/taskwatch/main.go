// Command taskwatch is the task API quickstart's WebSocket client (README,
// "Quickstart: the task API"): it opens the API's update stream, GET
// /v1/ws, as the user a token belongs to and prints each update the API
// pushes (a task created, changed or deleted, from any of the user's
// devices) as it arrives.
//
//	TOKEN=... go run ./examples/taskwatch
//
// A browser, which cannot set the header on a WebSocket, first takes a
// ticket (POST /v1/ws/ticket with the token) and opens
// new WebSocket("ws://host/v1/ws?ticket=...").
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/coder/websocket"
)

func main() {
	url := flag.String("url", "ws://127.0.0.1:8080/v1/ws", "the API's update stream")
	token := flag.String("token", os.Getenv("TOKEN"), "a token from POST /v1/auth/login (default $TOKEN)")
	count := flag.Int("count", 0, "exit after this many updates (0: run until Ctrl-C)")
	wait := flag.Duration("timeout", 0, "exit with an error if no update came for this long (0: wait for ever)")
	flag.Parse()
	log.SetFlags(0)
	if *token == "" {
		log.Fatal("taskwatch: no token: give --token, or set $TOKEN from POST /v1/auth/login")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := watch(ctx, *url, *token, *count, *wait); err != nil {
		log.Fatalf("taskwatch: %v", err)
	}
}

func watch(ctx context.Context, url, token string, count int, wait time.Duration) error {
	dialCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(dialCtx, url, &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + token}},
	})
	if err != nil {
		return err
	}
	defer conn.CloseNow()
	fmt.Fprintln(os.Stderr, "taskwatch: connected; waiting for updates")
	for n := 0; count == 0 || n < count; n++ {
		readCtx, cancel := ctx, context.CancelFunc(func() {})
		if wait > 0 {
			readCtx, cancel = context.WithTimeout(ctx, wait)
		}
		_, msg, err := conn.Read(readCtx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return nil // Ctrl-C
		case errors.Is(err, context.DeadlineExceeded):
			return fmt.Errorf("no update within %s", wait)
		case err != nil:
			return err
		}
		fmt.Printf("update: %s\n", msg)
	}
	return conn.Close(websocket.StatusNormalClosure, "")
}
