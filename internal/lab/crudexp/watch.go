package crudexp

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/highload-lab/hlab/internal/tasksload"
)

// watcher holds one WebSocket per account open during a row, as the
// report's devices kept theirs, and counts the task events they receive.
type watcher struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	events atomic.Int64
}

// watch opens a WebSocket for each of the first n VUs' tokens (one per
// account when n is the number of accounts).
func watch(ctx context.Context, addr string, sc *tasksload.Scenario, n int) (*watcher, error) {
	ctx, cancel := context.WithCancel(ctx)
	w := &watcher{cancel: cancel}
	for i := range n {
		tok := sc.Token(i)
		if tok == "" {
			continue // not signed in yet: the first row signs in first
		}
		dctx, dcancel := context.WithTimeout(ctx, 10*time.Second)
		conn, _, err := websocket.Dial(dctx, "ws://"+addr+"/v1/ws", &websocket.DialOptions{
			HTTPHeader: http.Header{"Authorization": {"Bearer " + tok}},
		})
		dcancel()
		if err != nil {
			w.stop()
			return nil, fmt.Errorf("crud: WebSocket of VU %d: %w", i, err)
		}
		w.wg.Go(func() {
			defer conn.CloseNow()
			for {
				if _, _, err := conn.Read(ctx); err != nil {
					return
				}
				w.events.Add(1)
			}
		})
	}
	return w, nil
}

// stop closes the WebSockets and returns the events they received.
func (w *watcher) stop() int64 {
	w.cancel()
	w.wg.Wait()
	return w.events.Load()
}
