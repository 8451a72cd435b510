package replica_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// wireProxy sits between a MongoDB client and server and makes the faults
// the MongoDB stand-in cannot make itself: it cuts every connection and
// refuses new ones while down (a network partition or a server that is
// gone), and it answers a change stream's resume (an aggregate with
// resumeAfter or startAfter) with the error a real server gives when the
// resume point has left its oplog: ChangeStreamHistoryLost (286). The
// stand-in never truncates its oplog, so that error cannot happen there.
//
// It reads the client's messages whole (OP_MSG and the rest share a
// 16-byte header: length, requestID, responseTo, opCode) and forwards
// them untouched unless it answers one itself.
type wireProxy struct {
	t      *testing.T
	ln     net.Listener
	target string

	mu          sync.Mutex
	conns       map[net.Conn]struct{}
	down        bool
	stalled     bool // requests are swallowed: nothing is answered, nothing closed
	failResumes int  // the next resumes to answer with ChangeStreamHistoryLost
	failed      atomic.Int64
	reqID       atomic.Int32
	setName     string     // non-empty: hello replies say the server is this replica set's primary
	commands    []bson.Raw // the OP_MSG bodies clients sent, when record is set
	record      bool
	// busy: a getMore the server answers with an empty batch is sent
	// again until it has changes, as on a collection written to faster
	// than its getMores come, which never sees an empty batch.
	busy bool
	// slow holds every getMore's answer this long.
	slow time.Duration
}

func newWireProxy(t *testing.T, target string) *wireProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &wireProxy{t: t, ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.reqID.Store(1 << 30)
	go p.accept()
	t.Cleanup(func() { ln.Close(); p.cut() })
	return p
}

// URI is a connection string through the proxy. Short timeouts: while
// the proxy is down, operations fail within a second instead of 30.
func (p *wireProxy) URI() string {
	return "mongodb://" + p.ln.Addr().String() + "/?directConnection=true&serverSelectionTimeoutMS=1000&connectTimeoutMS=1000"
}

// setDown cuts every connection and refuses new ones (down), or lets
// them through again.
func (p *wireProxy) setDown(down bool) {
	p.mu.Lock()
	p.down = down
	p.mu.Unlock()
	if down {
		p.cut()
	}
}

// setStalled swallows every request from now on (stalled), without
// closing anything: a server that stopped answering. Requests swallowed
// stay unanswered after it is lifted.
func (p *wireProxy) setStalled(stalled bool) {
	p.mu.Lock()
	p.stalled = stalled
	p.mu.Unlock()
}

// failNextResumes answers the next n change-stream resumes with
// ChangeStreamHistoryLost.
func (p *wireProxy) failNextResumes(n int) {
	p.mu.Lock()
	p.failResumes = n
	p.mu.Unlock()
}

func (p *wireProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}

func (p *wireProxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		p.mu.Unlock()
		if down {
			client.Close()
			continue
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		p.mu.Lock()
		p.conns[client], p.conns[server] = struct{}{}, struct{}{}
		p.mu.Unlock()
		w := &lockedWriter{w: client}
		hellos := &helloIDs{ids: map[uint32]bool{}}
		gets := &getMores{reqs: map[uint32][]byte{}}
		go func() { p.backward(server, w, hellos, gets); client.Close(); server.Close() }()
		go func() { p.forward(client, server, w, hellos, gets); client.Close(); server.Close() }()
	}
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

const opMsg = 2013

// readMsg reads one wire protocol message, its 16-byte header included.
func readMsg(r io.Reader) ([]byte, error) {
	var header [16]byte
	if _, err := io.ReadFull(r, header[:]); err != nil {
		return nil, err
	}
	n := int(binary.LittleEndian.Uint32(header[0:4]))
	if n < 16 || n > 48<<20 {
		return nil, fmt.Errorf("message length %d out of range", n)
	}
	msg := make([]byte, n)
	copy(msg, header[:])
	_, err := io.ReadFull(r, msg[16:])
	return msg, err
}

// forward copies the client's messages to the server, answering a resume
// itself when one is to fail.
func (p *wireProxy) forward(client, server net.Conn, toClient io.Writer, hellos *helloIDs, gets *getMores) {
	for {
		msg, err := readMsg(client)
		if err != nil {
			return
		}
		p.mu.Lock()
		stalled := p.stalled
		p.mu.Unlock()
		if stalled {
			continue
		}
		p.inspect(msg, hellos)
		if body, err := opMsgBody(msg); err == nil && binary.LittleEndian.Uint32(msg[12:16]) == opMsg && !body.Lookup("getMore").IsZero() {
			gets.put(binary.LittleEndian.Uint32(msg[4:8]), msg)
		}
		if binary.LittleEndian.Uint32(msg[12:16]) == opMsg && isResume(msg) && p.takeFailure() {
			reqID := binary.LittleEndian.Uint32(msg[4:8])
			if _, err := toClient.Write(p.historyLost(reqID)); err != nil {
				return
			}
			continue
		}
		if _, err := server.Write(msg); err != nil {
			return
		}
	}
}

func (p *wireProxy) takeFailure() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failResumes == 0 {
		return false
	}
	p.failResumes--
	p.failed.Add(1)
	return true
}

// isResume reports whether an OP_MSG is an aggregate that opens a change
// stream with resumeAfter or startAfter.
func isResume(msg []byte) bool {
	body, err := opMsgBody(msg)
	if err != nil || body.Lookup("aggregate").IsZero() {
		return false
	}
	cs, ok := body.Lookup("pipeline", "0", "$changeStream").DocumentOK()
	return ok && (!cs.Lookup("resumeAfter").IsZero() || !cs.Lookup("startAfter").IsZero())
}

// opMsgBody returns the body section (kind 0) of an OP_MSG.
func opMsgBody(msg []byte) (bson.Raw, error) {
	rest := msg[20:] // header, flagBits
	for len(rest) > 5 {
		kind := rest[0]
		size := int(binary.LittleEndian.Uint32(rest[1:5]))
		if size < 5 || size > len(rest)-1 {
			break
		}
		if kind == 0 {
			return bson.Raw(rest[1 : 1+size]), nil
		}
		rest = rest[1+size:]
	}
	return nil, errors.New("no body section")
}

// historyLost is the reply a server gives to a resume from a point no
// longer in its oplog.
func (p *wireProxy) historyLost(responseTo uint32) []byte {
	doc, err := bson.Marshal(bson.D{
		{Key: "ok", Value: 0.0},
		{Key: "errmsg", Value: "Resume of change stream was not possible, as the resume point may no longer be in the oplog."},
		{Key: "code", Value: int32(286)},
		{Key: "codeName", Value: "ChangeStreamHistoryLost"},
	})
	if err != nil {
		p.t.Error(err)
	}
	out := make([]byte, 16, 16+4+1+len(doc))
	out = binary.LittleEndian.AppendUint32(out, 0) // flagBits
	out = append(out, 0)                           // section kind 0: the body
	out = append(out, doc...)
	binary.LittleEndian.PutUint32(out[0:4], uint32(len(out)))
	binary.LittleEndian.PutUint32(out[4:8], uint32(p.reqID.Add(1)))
	binary.LittleEndian.PutUint32(out[8:12], responseTo)
	binary.LittleEndian.PutUint32(out[12:16], opMsg)
	return out
}

// actAsReplicaSet makes hello replies say the server is the primary of
// replica set name. The stand-in calls itself a standalone, to which the
// driver sends no read preference; as a replica-set member it gets one
// with every read, as a real deployment does, and a test can check it.
func (p *wireProxy) actAsReplicaSet(name string) {
	p.mu.Lock()
	p.setName = name
	p.mu.Unlock()
}

// recordCommands keeps the body of every OP_MSG clients send from now on.
func (p *wireProxy) recordCommands() {
	p.mu.Lock()
	p.record = true
	p.mu.Unlock()
}

// sent returns the recorded commands named name (their first key) on
// collection coll.
func (p *wireProxy) sent(name, coll string) []bson.Raw {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []bson.Raw
	for _, c := range p.commands {
		if first, err := c.IndexErr(0); err == nil && first.Key() == name {
			if s, ok := first.Value().StringValueOK(); ok && s == coll {
				out = append(out, c)
			}
		}
	}
	return out
}

// helloIDs are the request ids of one connection's hello commands, whose
// replies actAsReplicaSet rewrites.
type helloIDs struct {
	mu  sync.Mutex
	ids map[uint32]bool
}

func (h *helloIDs) add(id uint32) {
	h.mu.Lock()
	h.ids[id] = true
	h.mu.Unlock()
}

func (h *helloIDs) take(id uint32) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	ok := h.ids[id]
	delete(h.ids, id)
	return ok
}

const (
	opReply = 1
	opQuery = 2004
)

// inspect records a client's command and notes hello requests.
func (p *wireProxy) inspect(msg []byte, hellos *helloIDs) {
	var body bson.Raw
	switch binary.LittleEndian.Uint32(msg[12:16]) {
	case opMsg:
		body, _ = opMsgBody(msg)
	case opQuery: // the first hello of a connection: flags, "admin.$cmd", skip, return, query
		rest := msg[20:]
		for i, c := range rest {
			if c == 0 {
				if len(rest) > i+9 {
					body = bson.Raw(rest[i+9:])
				}
				break
			}
		}
	}
	if body == nil {
		return
	}
	first, err := body.IndexErr(0)
	if err != nil {
		return
	}
	switch first.Key() {
	case "hello", "isMaster", "ismaster":
		hellos.add(binary.LittleEndian.Uint32(msg[4:8]))
	}
	p.mu.Lock()
	if p.record {
		p.commands = append(p.commands, bson.Raw(append([]byte(nil), body...)))
	}
	p.mu.Unlock()
}

// backward copies the server's replies to the client, rewriting hello
// replies when the proxy acts as a replica set.
func (p *wireProxy) backward(server net.Conn, toClient io.Writer, hellos *helloIDs, gets *getMores) {
	for {
		msg, err := readMsg(server)
		if err != nil {
			return
		}
		p.mu.Lock()
		setName, busy, slow := p.setName, p.busy, p.slow
		p.mu.Unlock()
		if req := gets.take(binary.LittleEndian.Uint32(msg[8:12])); req != nil {
			if busy && emptyBatch(msg) {
				time.Sleep(5 * time.Millisecond)
				gets.put(binary.LittleEndian.Uint32(req[4:8]), req)
				if _, err := server.Write(req); err != nil {
					return
				}
				continue
			}
			time.Sleep(slow)
		}
		if setName != "" && hellos.take(binary.LittleEndian.Uint32(msg[8:12])) {
			msg = p.asPrimary(msg, setName)
		}
		if _, err := toClient.Write(msg); err != nil {
			return
		}
	}
}

// asPrimary rewrites a hello reply (OP_REPLY or OP_MSG) to name the
// server the primary of replica set setName.
func (p *wireProxy) asPrimary(msg []byte, setName string) []byte {
	var prefix, doc []byte
	switch binary.LittleEndian.Uint32(msg[12:16]) {
	case opReply: // flags, cursorID, startingFrom, numberReturned, documents
		prefix, doc = msg[:36], msg[36:]
	case opMsg: // flagBits, kind-0 section
		flags := binary.LittleEndian.Uint32(msg[16:20])
		if flags&1 != 0 { // drop the checksum
			msg = msg[:len(msg)-4]
		}
		prefix = append([]byte(nil), msg[:21]...)
		binary.LittleEndian.PutUint32(prefix[16:20], flags&^1)
		doc = msg[21:]
	default:
		return msg
	}
	var d bson.D
	if err := bson.Unmarshal(doc, &d); err != nil {
		p.t.Errorf("proxy: hello reply: %v", err)
		return msg
	}
	d = append(d, bson.E{Key: "setName", Value: setName}, bson.E{Key: "hosts", Value: bson.A{p.ln.Addr().String()}},
		bson.E{Key: "me", Value: p.ln.Addr().String()}, bson.E{Key: "secondary", Value: false})
	body, err := bson.Marshal(d)
	if err != nil {
		p.t.Errorf("proxy: hello reply: %v", err)
		return msg
	}
	out := append(append([]byte(nil), prefix...), body...)
	binary.LittleEndian.PutUint32(out[0:4], uint32(len(out)))
	return out
}

// setBusy makes getMores never come back empty (see wireProxy.busy).
func (p *wireProxy) setBusy(busy bool) {
	p.mu.Lock()
	p.busy = busy
	p.mu.Unlock()
}

// setSlow holds every getMore's answer for d (0: not at all).
func (p *wireProxy) setSlow(d time.Duration) {
	p.mu.Lock()
	p.slow = d
	p.mu.Unlock()
}

// getMores are one connection's getMore requests awaiting their answer,
// by request id.
type getMores struct {
	mu   sync.Mutex
	reqs map[uint32][]byte
}

func (g *getMores) put(id uint32, msg []byte) {
	g.mu.Lock()
	g.reqs[id] = msg
	g.mu.Unlock()
}

func (g *getMores) take(id uint32) []byte {
	g.mu.Lock()
	defer g.mu.Unlock()
	msg := g.reqs[id]
	delete(g.reqs, id)
	return msg
}

// emptyBatch reports whether a reply is a cursor's batch with nothing in it.
func emptyBatch(msg []byte) bool {
	body, err := opMsgBody(msg)
	if err != nil {
		return false
	}
	batch, ok := body.Lookup("cursor", "nextBatch").ArrayOK()
	if !ok {
		return false
	}
	vals, err := batch.Values()
	return err == nil && len(vals) == 0
}
