package replica

import (
	"bufio"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Restart from disk (see the package doc): in durable mode the source
// keeps its slot when Run ends, writes its tables and the position they
// reflect to a file, and a new process loads that file and streams from
// its position instead of loading a snapshot. The server is told it may
// recycle WAL only up to the position of the last file written, so the
// slot always holds what the file lacks.

// Why a start did not come from the restart file: DiskStart's reason.
const (
	DiskFileMissing    = "file_missing"
	DiskFileUnreadable = "file_unreadable"      // torn, corrupt, or of another format
	DiskOtherSource    = "file_of_another_slot" // another slot, database or server wrote it
	DiskSchemaChanged  = "schema_changed"       // bound tables, their columns, types or the Go types differ
	DiskSlotMissing    = "slot_missing"
	DiskSlotInvalid    = "slot_invalidated"
	DiskSlotAhead      = "slot_ahead_of_file" // the slot confirmed past the file: the WAL between is gone
)

// diskFormat is the restart file's format version.
const diskFormat = 1

// PostgresPersist makes the source durable: its slot (which must be named
// with PostgresSlot) outlives Run, and its tables and the WAL position
// they reflect are written to the file at path every interval (when the
// position moved) and when Run ends. A source started with the same
// option loads the file, if it still fits the tables and the slot, and
// streams from its position; otherwise it loads a snapshot and says why
// (DiskStart). Values are written with encoding/gob: every bound table's
// key and value types must be made of exported fields (or implement
// GobEncoder), which NewPostgresSource checks. See "Restart from disk" in
// the package doc for what the slot then keeps on the server.
func PostgresPersist(path string, interval time.Duration) PostgresOption {
	return func(c *pgConfig) { c.persistPath, c.persistEvery = path, interval }
}

// diskHeader starts a restart file: what the rows are of, and what tells
// whether they still fit.
type diskHeader struct {
	Format   int
	SystemID string // the server's (IDENTIFY_SYSTEM)
	Database string
	Slot     string
	LSN      uint64 // every change that committed before it is in the rows
	Written  time.Time
	Tables   []diskTable // sorted by name, in the order their rows follow
}

type diskTable struct {
	Name     string
	OID      uint32
	Rels     map[uint32]string // the relations the stream carries, by OID: their signatures
	Columns  []diskColumn
	Held     []string
	Identity []string
	Types    string // the Go key and value types, as gob writes them
	Rows     int
}

type diskColumn struct {
	Name string
	Type uint32
}

// pgPersist is the durable mode's state.
type pgPersist struct {
	path     string
	interval time.Duration
	types    map[string]string // by table: valueTypes
	// durable is the position of the last file written and synced: the
	// most the server may be told is flushed.
	durable atomic.Uint64
	// On the applier's goroutine: when the next image is due, and the
	// position of the last one taken.
	next   time.Time
	taken  pglogrepl.LSN
	images chan *diskImage
	// writing is set while the writer has an image: the bindings' held
	// values are its to read until the applier sees it cleared.
	writing       atomic.Bool
	writer        sync.WaitGroup
	sysID, dbName string

	mu      sync.Mutex
	start   string // "" after a start from the file, else why not
	tried   bool
	lastErr error // the last write's error
}

// diskImage is the tables at one position, to be written.
type diskImage struct {
	header diskHeader
	tables []tableImage
	types  *pgtype.Map // encodes the held values: the applier's map is not shared
}

// initPersist checks the durable mode's settings.
func (s *PostgresSource) initPersist() error {
	c := s.cfg
	if c.persistPath == "" && c.persistEvery == 0 {
		return nil
	}
	if c.persistPath == "" || c.persistEvery <= 0 {
		return fmt.Errorf("replica: PostgresPersist needs a file path and an interval above 0 (got %q, %s)", c.persistPath, c.persistEvery)
	}
	if !c.slotNamed {
		return errors.New("replica: PostgresPersist needs a slot of this replica's own (PostgresSlot): the slot outlives Run, and two replicas cannot share one")
	}
	if st, err := os.Stat(filepath.Dir(c.persistPath)); err != nil || !st.IsDir() {
		return fmt.Errorf("replica: PostgresPersist: the directory of %s must exist (make it, or give another path): %v", c.persistPath, err)
	}
	p := &pgPersist{path: c.persistPath, interval: c.persistEvery, types: map[string]string{}}
	for name, b := range s.bindings {
		types, err := b.valueTypes()
		if err != nil {
			return fmt.Errorf("replica: PostgresPersist writes rows with encoding/gob: %w", err)
		}
		p.types[name] = types
	}
	s.persist = p
	return nil
}

// DiskStart reports how the source's first load went in durable mode
// (PostgresPersist): tried is false until it got there (and always
// without the option); refused is "" if the tables came from the restart
// file, else why they came from a snapshot (a Disk* constant).
func (s *PostgresSource) DiskStart() (tried bool, refused string) {
	p := s.persist
	if p == nil {
		return false, ""
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tried, p.start
}

// flushPosition is what the server is told it may recycle WAL before:
// what is applied, and in durable mode no further than the last file.
func (s *PostgresSource) flushPosition() pglogrepl.LSN {
	if s.persist == nil {
		return s.confirmed
	}
	return min(s.confirmed, pglogrepl.LSN(s.persist.durable.Load()))
}

// startPersisting starts the writer of restart files; the function it
// returns, run when Run ends, stops it and writes the last file.
func (s *PostgresSource) startPersisting() func() {
	p := s.persist
	if p == nil {
		return func() {}
	}
	// Temporary files of writes a crash cut short: never renamed, never read.
	if stale, err := filepath.Glob(p.path + ".tmp*"); err == nil {
		for _, f := range stale {
			os.Remove(f)
		}
	}
	p.images = make(chan *diskImage, 1)
	p.writer.Go(func() {
		for img := range p.images {
			s.writeDisk(img)
			p.writing.Store(false)
		}
	})
	return func() {
		close(p.images)
		p.writer.Wait()
		s.thawHeld()
		// Only tables that a load finished and the stream followed: a
		// resync cut short leaves the last file, which its new slot refuses.
		if s.loaded && s.confirmed > pglogrepl.LSN(p.durable.Load()) {
			s.writeDisk(s.image())
			s.thawHeld()
		}
	}
}

// persistTick hands the writer an image of the tables when one is due:
// between transactions, after the interval, if the position moved and
// the writer is free. It runs on the applier's goroutine, and copies
// nothing: the image is of immutable versions and of held values the
// applier leaves alone until the writer is done.
func (s *PostgresSource) persistTick(inTx bool) {
	p := s.persist
	if p == nil || p.writing.Load() {
		return
	}
	s.thawHeld()
	if inTx || !s.loaded || s.confirmed <= p.taken || time.Now().Before(p.next) {
		return
	}
	p.writing.Store(true)
	p.images <- s.image() // the writer is free: it cleared writing
	p.taken, p.next = s.confirmed, time.Now().Add(p.interval)
}

func (s *PostgresSource) thawHeld() {
	for _, b := range s.bindings {
		b.thawHeld()
	}
}

// image takes the tables as they are now.
func (s *PostgresSource) image() *diskImage {
	p := s.persist
	img := &diskImage{types: pgtype.NewMap(), header: diskHeader{Format: diskFormat, SystemID: p.sysID, Database: p.dbName,
		Slot: s.cfg.slot, LSN: uint64(s.confirmed)}}
	for _, name := range slices.Sorted(maps.Keys(s.bindings)) {
		t, b := s.tables[name], s.bindings[name]
		dt := diskTable{Name: name, OID: t.oid, Rels: map[uint32]string{}, Held: t.shape.held, Identity: t.shape.identity, Types: p.types[name]}
		for oid, r := range t.rels {
			dt.Rels[oid] = r.sig
		}
		for _, c := range t.columns {
			dt.Columns = append(dt.Columns, diskColumn{Name: c.name, Type: c.typ})
			if typ, ok := s.typeMap.TypeForOID(c.typ); ok && slices.Contains(t.shape.held, c.name) {
				img.types.RegisterType(typ)
			}
		}
		ti := b.image()
		dt.Rows = ti.rows()
		img.header.Tables = append(img.header.Tables, dt)
		img.tables = append(img.tables, ti)
	}
	return img
}

// crashBeforeRename, when set (by tests), stands for a process that dies
// after writing the temporary file and before renaming it.
var crashBeforeRename atomic.Pointer[func() error]

// writeDisk writes img to the restart file atomically (a temporary file
// in the same directory, synced, renamed over the old one, the directory
// synced) and then lets the server recycle WAL up to its position. A
// failed write keeps the last file, and the slot keeps the WAL since it.
func (s *PostgresSource) writeDisk(img *diskImage) {
	p := s.persist
	start := time.Now()
	img.header.Written = start
	err := writeAtomically(p.path, func(w io.Writer) error {
		enc := gob.NewEncoder(w)
		if err := enc.Encode(&img.header); err != nil {
			return err
		}
		for i, ti := range img.tables {
			dt := img.header.Tables[i]
			if err := ti.write(enc, func(vals []any) ([][]byte, error) { return encodeHeld(img.types, dt, vals) }); err != nil {
				return fmt.Errorf("table %s: %w", dt.Name, err)
			}
		}
		return nil
	})
	p.mu.Lock()
	p.lastErr = err
	p.mu.Unlock()
	if err != nil {
		s.cfg.logger.Error("replica: could not write the restart file; the slot keeps the WAL since the last one written", "path", p.path, "err", err)
		return
	}
	p.durable.Store(img.header.LSN)
	s.cfg.logger.Debug("replica: restart file written", "path", p.path, "lsn", pglogrepl.LSN(img.header.LSN).String(), "took", time.Since(start))
}

// writeAtomically writes a file that is either wholly the old one or
// wholly the new one after a crash: body's bytes and their CRC-32 to a
// temporary file, synced, then renamed over path, and the directory
// synced so the rename itself is durable.
func writeAtomically(path string, body func(io.Writer) error) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op once renamed
	bw := bufio.NewWriterSize(f, 1<<20)
	sum := crc32.NewIEEE()
	err = body(io.MultiWriter(bw, sum))
	if err == nil {
		_, err = bw.Write(sum.Sum(nil))
	}
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if crash := crashBeforeRename.Load(); err == nil && crash != nil {
		err = (*crash)()
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(dir)
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// encodeHeld writes a row's held values as the text the source decodes
// them from.
func encodeHeld(types *pgtype.Map, t diskTable, vals []any) ([][]byte, error) {
	out := make([][]byte, len(vals))
	for i, v := range vals {
		if v == nil {
			continue
		}
		oid := heldOID(t, i)
		typ, known := types.TypeForOID(oid)
		if str, ok := v.(string); ok && (!known || verbatim(typ.Codec)) {
			// A type the decoder does not know decodes as its text, and
			// text types' values are their text: no encoder needed.
			out[i] = []byte(str)
			continue
		}
		if !known {
			return nil, fmt.Errorf("column %s: cannot write a %T of type OID %d", t.Held[i], v, oid)
		}
		buf, err := types.Encode(oid, pgtype.TextFormatCode, v, nil)
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", t.Held[i], err)
		}
		if buf == nil {
			buf = []byte{}
		}
		out[i] = buf
	}
	return out, nil
}

// verbatim says whether a codec's strings are their own text form (not
// json's, whose string "a" is written "\"a\"").
func verbatim(c pgtype.Codec) bool {
	switch c.(type) {
	case pgtype.TextCodec, *pgtype.TextCodec, *pgtype.EnumCodec:
		return true
	}
	return false
}

func heldOID(t diskTable, i int) uint32 {
	for _, c := range t.Columns {
		if c.Name == t.Held[i] {
			return c.Type
		}
	}
	return 0
}

// refuseDisk records why the start is from a snapshot.
func (s *PostgresSource) refuseDisk(reason, why string) {
	p := s.persist
	p.mu.Lock()
	p.tried, p.start = true, reason
	p.mu.Unlock()
	s.cfg.logger.Warn("replica: not restarting from disk: loading a snapshot", "path", p.path, "reason", reason, "why", why)
}

// restoreFromDisk loads the tables from the restart file, before the
// first load, if it fits: the same server, database and slot, the bound
// tables as the catalog has them now, and a slot that still holds the WAL
// since the file's position. It leaves s.loaded false, and says why, if
// it does not.
func (s *PostgresSource) restoreFromDisk(ctx context.Context, conn *pgx.Conn, tables map[string]*pgTable, slot slotState, sys pglogrepl.IdentifySystemResult) {
	p := s.persist
	p.sysID, p.dbName = sys.SystemID, sys.DBName
	if p.tried {
		return
	}
	start := time.Now()
	f, err := os.Open(p.path)
	if errors.Is(err, fs.ErrNotExist) {
		s.refuseDisk(DiskFileMissing, "no file at "+p.path)
		return
	}
	if err != nil {
		s.refuseDisk(DiskFileUnreadable, err.Error())
		return
	}
	defer f.Close()
	dec, err := checkedDecoder(f)
	if err != nil {
		s.refuseDisk(DiskFileUnreadable, err.Error())
		return
	}
	var h diskHeader
	if err := dec.Decode(&h); err != nil || h.Format != diskFormat {
		s.refuseDisk(DiskFileUnreadable, fmt.Sprintf("format %d (want %d): %v", h.Format, diskFormat, err))
		return
	}
	if h.SystemID != sys.SystemID || h.Database != sys.DBName || h.Slot != s.cfg.slot {
		s.refuseDisk(DiskOtherSource, fmt.Sprintf("written for slot %s of database %s on server %s", h.Slot, h.Database, h.SystemID))
		return
	}
	if why := s.diskFits(h, tables); why != "" {
		s.refuseDisk(DiskSchemaChanged, why)
		return
	}
	lsn := pglogrepl.LSN(h.LSN)
	switch {
	case !slot.exists || !slot.ourDB:
		s.refuseDisk(DiskSlotMissing, "no logical slot "+s.cfg.slot+" on this database")
		return
	case slot.invalid != "":
		s.refuseDisk(DiskSlotInvalid, slot.invalid)
		return
	case slot.confirmed > lsn:
		s.refuseDisk(DiskSlotAhead, fmt.Sprintf("the slot confirmed %s, past the file's %s: the WAL between is gone", slot.confirmed, lsn))
		return
	}
	s.loadTypes(ctx, conn, tables)
	for _, dt := range h.Tables {
		b := s.bindings[dt.Name]
		b.setShape(tables[dt.Name].shape)
		held := func(text [][]byte) ([]any, error) { return s.decodeHeld(dt, text) }
		if err := b.restore(dec, dt.Rows, held, h.Written); err != nil {
			s.refuseDisk(DiskFileUnreadable, err.Error())
			return
		}
	}
	s.tables = tables
	s.applied, s.confirmed, s.loaded, s.started = lsn, lsn, true, true
	s.position.Store(uint64(lsn))
	s.ownSlot, s.made = true, slot.confirmed
	p.durable.Store(h.LSN)
	p.taken = lsn
	p.mu.Lock()
	p.tried, p.start = true, ""
	p.mu.Unlock()
	s.cfg.logger.Info("replica: tables loaded from the restart file; streaming from its position", "path", p.path, "lsn", lsn.String(),
		"written", h.Written, "took", time.Since(start))
	s.reportRetained(ctx, conn, h.Written)
}

// reportRetained logs how much WAL the slot kept while no replica
// followed it: what a stopped durable replica costs the server.
func (s *PostgresSource) reportRetained(ctx context.Context, conn *pgx.Conn, written time.Time) {
	var retained *int64
	err := conn.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint FROM pg_replication_slots WHERE slot_name = $1`,
		s.cfg.slot).Scan(&retained)
	if err != nil || retained == nil {
		return
	}
	s.cfg.logger.Warn("replica: the durable slot kept WAL on the server while no replica followed it (bound it with max_slot_wal_keep_size)",
		"slot", s.cfg.slot, "retained_bytes", *retained, "file_age", time.Since(written).Round(time.Second))
}

// checkedDecoder checks the file's CRC-32 and returns a decoder of what
// it covers.
func checkedDecoder(f *os.File) (*gob.Decoder, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := st.Size() - crc32.Size
	if size <= 0 {
		return nil, errors.New("the file is too short")
	}
	sum := crc32.NewIEEE()
	if _, err := io.Copy(sum, io.NewSectionReader(f, 0, size)); err != nil {
		return nil, err
	}
	want := make([]byte, crc32.Size)
	if _, err := f.ReadAt(want, size); err != nil {
		return nil, err
	}
	if string(sum.Sum(nil)) != string(want) {
		return nil, errors.New("its checksum does not match: torn or corrupt")
	}
	return gob.NewDecoder(bufio.NewReaderSize(io.NewSectionReader(f, 0, size), 1<<20)), nil
}

// diskFits says how the file's tables differ from those bound and the
// catalog's now ("" if they do not).
func (s *PostgresSource) diskFits(h diskHeader, now map[string]*pgTable) string {
	if len(h.Tables) != len(s.bindings) {
		return fmt.Sprintf("the file has %d tables, %d are bound", len(h.Tables), len(s.bindings))
	}
	was := map[string]*pgTable{}
	for _, dt := range h.Tables {
		t := now[dt.Name]
		switch {
		case t == nil:
			return "table " + dt.Name + " is not bound"
		case dt.Types != s.persist.types[dt.Name]:
			return fmt.Sprintf("table %s: the Go types changed: the file has %s, the program %s", dt.Name, dt.Types, s.persist.types[dt.Name])
		case !slices.Equal(dt.Held, t.shape.held) || !slices.Equal(dt.Identity, t.shape.identity):
			return "table " + dt.Name + ": its replica identity or its columns stored out of line changed"
		}
		rels := map[uint32]*pgRel{}
		for oid, sig := range dt.Rels {
			rels[oid] = &pgRel{sig: sig}
		}
		was[dt.Name] = &pgTable{oid: dt.OID, rels: rels}
	}
	return diffTables(was, now)
}

// decodeHeld reads a row's held values back from their text.
func (s *PostgresSource) decodeHeld(t diskTable, text [][]byte) ([]any, error) {
	if len(text) != len(t.Held) {
		return nil, fmt.Errorf("%d held values, want %d", len(text), len(t.Held))
	}
	vals := make([]any, len(text))
	for i, b := range text {
		if b == nil {
			continue
		}
		v, err := s.decodeText(b, heldOID(t, i))
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", t.Held[i], err)
		}
		vals[i] = v
	}
	return vals, nil
}
