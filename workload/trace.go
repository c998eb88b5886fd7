package workload

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/mocker-sim/mocker/tokenize"
)

// TraceOptions says how to read a trace file.
type TraceOptions struct {
	TraceBlockSize int    // tokens per hash id (default when 0: 512, the Mooncake traces' block)
	Format         string // "" or "auto" (by content/extension), "mooncake", "bailian", "azure", "applied-compute"

	// Tokenizer makes the prompt of a row given as text_input or messages;
	// nil: tokenize.Builtin().
	Tokenizer tokenize.Tokenizer
	// OutputLen draws the output length of the row of Key key when the row
	// gives none (AIPerf's rows may leave it to the server); nil: such a
	// row is an error.
	OutputLen func(key uint64) int
	// Warn, if set, gets one warning naming the fields the trace gives
	// that the replay does not read (nil: they pass silently).
	Warn func(msg string)
	// ImageTokens is the size of each image_url part of a messages row
	// (0: DefaultImageTokens), as serve's --image-tokens.
	ImageTokens int
	// Use, if set, is filled in as the rows are read: which of the
	// options above that only some rows read they did read.
	Use *TraceUse
}

// TraceUse says which of the TraceOptions that only some rows read a
// trace's rows read, so that a caller can refuse a setting that none did.
type TraceUse struct {
	Tokenizer   bool // some row is text_input or messages
	OutputLen   bool // some row gives no output length
	BlockSize   bool // some row's prompt is its hash_ids (TraceBlockSize tokens each)
	ImageTokens bool // some messages row has an image_url part
}

// DefaultTraceBlockSize is the block size of the public Mooncake traces.
const DefaultTraceBlockSize = 512

// TraceError is an error in a trace file. It prints as
// "trace FILE line N: FIELD: problem", leaving out what is unknown.
type TraceError struct {
	Path  string // the file (or the name given to ReadTrace)
	Line  int    // 1-based line, 0 if the error is not about one line
	Field string // the field as the file spells it, "" if none
	Err   error
}

func (e *TraceError) Error() string {
	var b strings.Builder
	b.WriteString("trace ")
	b.WriteString(e.Path)
	if e.Line > 0 {
		fmt.Fprintf(&b, " line %d", e.Line)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *TraceError) Unwrap() error { return e.Err }

// OpenTrace reads and validates the whole file up front (metadata only:
// lengths, hash ids, times — no tokens) and returns a Source over it. Any
// error names the file, the 1-based line and the field. Lines are at most
// MaxLineBytes and token counts at most MaxTokens; a row's hash ids must
// cover its input_length (ceil or floor of input_length / block ids), and
// request_ids are unique.
//
// Mooncake rows sharing a session_id are the turns of one session, in file
// order; other rows are sessions of one turn. A session's first turn
// arrives at its timestamp; a later turn's Delay is its delay field, else
// the difference of its timestamp and the previous turn's. Sessions must
// start in time order in the file, as the published traces do (a later
// turn may come after rows of other sessions). Times are shifted so that
// the earliest arrival is 0; a later turn's At is its own timestamp, or
// without one the previous turn's At plus its Delay. Azure rows, sorted
// too, are sessions of one turn arriving at their TIMESTAMP less the first.
func OpenTrace(path string, opts TraceOptions) (Source, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	defer f.Close()
	return ReadTrace(f, path, opts)
}

// ReadTrace is OpenTrace over a reader; name is used in error messages and,
// for format "auto", a ".csv" extension selects the Azure format.
func ReadTrace(r io.Reader, name string, opts TraceOptions) (Source, error) {
	bs := opts.TraceBlockSize
	switch {
	case bs == 0:
		bs = DefaultTraceBlockSize
	case bs < 0:
		return nil, &TraceError{Path: name, Err: fmt.Errorf("trace block size must be >= 1, got %d", bs)}
	case bs > MaxTokens:
		return nil, &TraceError{Path: name, Err: fmt.Errorf("trace block size must be <= %d, got %d", MaxTokens, bs)}
	}
	lr := &lineReader{br: bufio.NewReaderSize(r, 64<<10)}
	format := opts.Format
	if format == "" || format == "auto" {
		format = detectFormat(name, lr.br)
	}
	var (
		src *sessionList
		err error
	)
	switch format {
	case "mooncake", "bailian":
		src, err = readMooncake(lr, name, bs, opts, format == "bailian")
	case "azure":
		src, err = readAzure(lr, name)
	case "applied-compute":
		src, err = readApplied(lr, name, opts)
	default:
		return nil, &TraceError{Path: name, Err: fmt.Errorf("unknown trace format %q (want auto, mooncake, bailian, azure or applied-compute)", opts.Format)}
	}
	if err != nil {
		return nil, err
	}
	if src.requests == 0 {
		return nil, &TraceError{Path: name, Err: errors.New("no requests")}
	}
	return src, nil
}

const utf8BOM = "\xef\xbb\xbf"

// detectFormat picks azure for a .csv name or a first line starting with
// TIMESTAMP (the Azure header), applied-compute for a first line with a
// num_turns key, bailian for one with parent_chat_id, mooncake otherwise.
func detectFormat(name string, br *bufio.Reader) string {
	if strings.EqualFold(filepath.Ext(name), ".csv") {
		return "azure"
	}
	head, _ := br.Peek(br.Size()) // as much as is there: a short file gives less
	head = bytes.TrimPrefix(head, []byte(utf8BOM))
	if bytes.HasPrefix(head, []byte("TIMESTAMP")) {
		return "azure"
	}
	first, _, _ := bytes.Cut(head, []byte("\n"))
	switch {
	case bytes.Contains(first, []byte(`"num_turns"`)):
		return "applied-compute"
	case bytes.Contains(first, []byte(`"parent_chat_id"`)):
		return "bailian"
	}
	return "mooncake"
}

// MaxLineBytes bounds a trace line. The longest row of the public traces is
// 2.7 KB; a 1 M-token prompt at 16 tokens per hash id is about 600 KB. The
// parser holds ~500 bytes per JSON value of a line, so a line of 1 MiB costs
// at most ~250 MB; a file without newlines (/dev/zero) stops here, not when
// memory runs out.
const MaxLineBytes = 1 << 20

// lineReader yields the lines of a file without their line ending, counting
// them (blank ones too) so errors can name the line.
type lineReader struct {
	br   *bufio.Reader
	buf  []byte // a line longer than br's buffer
	line int    // 1-based number of the line last returned
}

// next returns the next line, valid until the following call, or io.EOF. A
// last line without a newline is a line.
func (l *lineReader) next() ([]byte, error) {
	b, err := l.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		l.buf = append(l.buf[:0], b...)
		for errors.Is(err, bufio.ErrBufferFull) {
			if len(l.buf) > MaxLineBytes {
				return nil, fmt.Errorf("line longer than %d MiB (not a trace?)", MaxLineBytes>>20)
			}
			b, err = l.br.ReadSlice('\n')
			l.buf = append(l.buf, b...)
		}
		b = l.buf
	}
	if err != nil && (err != io.EOF || len(b) == 0) {
		if err != io.EOF {
			err = fmt.Errorf("read: %w", err)
		}
		return nil, err
	}
	l.line++
	if l.line == 1 {
		b = bytes.TrimPrefix(b, []byte(utf8BOM))
	}
	b = bytes.TrimSuffix(b, []byte("\n"))
	b = bytes.TrimSuffix(b, []byte("\r"))
	return b, nil
}

// record returns the next non-blank line, or io.EOF; a read error is a *TraceError for the file name.
func (l *lineReader) record(name string) ([]byte, error) {
	for {
		line, err := l.next()
		if err == io.EOF {
			return nil, err
		}
		if err != nil {
			return nil, &TraceError{Path: name, Line: l.line + 1, Err: err}
		}
		if len(bytes.TrimLeft(line, " \t\r")) > 0 {
			return line, nil
		}
	}
}
