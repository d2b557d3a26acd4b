package main

// HTTP/1.1 on one connection, as S3's clients speak it: keep-alive, one request at a time (each answered before the
// next is handled, as memory_wire's listener does), a body by Content-Length or chunked, "Expect: 100-continue"
// answered. One goroutine per connection reads and applies each request at once; its answer is written, in one
// write, by the answer queue (one goroutine for every connection, waking at most once a millisecond) once the
// request's latency has passed, so that a request costs no goroutine of its own sleeping. net/http's server costs
// about twice the CPU per request (a background read and its abort per request with a body), and this store's
// point is its answers per CPU-second.

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"time"
)

// request is one HTTP request, read whole.
type request struct {
	Method     string
	RequestURI string
	Host       string
	Header     fields
	Body       []byte
	close      bool
	held       [12]field // room for Header's first dozen (a request is one allocation with its headers)
}

var errMalformed = errors.New("malformed HTTP request")

// fields are a request's headers, in order: lower-case names, a repeated header's values joined by "," (a slice:
// a request has a dozen, looked up a few times).
type fields []field

type field struct{ name, value string }

func (f fields) lookup(name string) (string, bool) {
	for i := range f {
		if f[i].name == name {
			return f[i].value, true
		}
	}
	return "", false
}

func (f fields) get(name string) string {
	value, _ := f.lookup(name)
	return value
}

func (f *fields) add(name, value string) {
	for i := range *f {
		if (*f)[i].name == name {
			(*f)[i].value += "," + value
			return
		}
	}
	*f = append(*f, field{name, value})
}

// serve answers every connection the listener accepts.
func (s *Server) serve(listener net.Listener) error {
	for {
		conn, err := listener.Accept()
		if err != nil {
			var transient interface{ Temporary() bool }
			if errors.As(err, &transient) && transient.Temporary() {
				continue
			}
			return err
		}
		s.connections.Add(1)
		go s.serveConn(conn)
	}
}

// connection is one client's connection: its answer in the queue, if one is.
type connection struct {
	conn        net.Conn
	written     chan struct{} // the queued answer was written (capacity 1)
	outstanding bool          // an answer is queued (the connection's goroutine only)
}

// settle waits for the connection's queued answer to be written (at once unless the client sent before it came).
func (c *connection) settle() {
	if c.outstanding {
		<-c.written
		c.outstanding = false
	}
}

func (s *Server) serveConn(conn net.Conn) {
	defer conn.Close()
	c := &connection{conn: conn, written: make(chan struct{}, 1)}
	reader := bufio.NewReaderSize(conn, 16<<10)
	text := textproto.NewReader(reader)
	for {
		req, err := readRequest(text, reader, c)
		if err != nil {
			if errors.Is(err, errMalformed) {
				c.settle()
				_, _ = conn.Write([]byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
			}
			c.settle()
			return
		}
		reply, delay := s.handle(req)
		data := renderAnswer(req, reply)
		c.settle()
		if delay <= 0 || req.close {
			wait(delay)
			if _, err := conn.Write(data); err != nil || req.close {
				return
			}
			continue
		}
		c.outstanding = true
		s.queue.add(&queued{due: time.Now().Add(time.Duration(delay * float64(time.Second))), conn: c, data: data})
	}
}

// queued is an answer waiting for its time.
type queued struct {
	due  time.Time
	conn *connection
	data []byte
}

func (q *queued) dueAt() time.Time { return q.due }

// answerQueue writes each answer when it is due: a heap by due time, one goroutine waking at the earliest due time
// but at most once a millisecond (the answers due in between written together).
type answerQueue struct {
	mu   sync.Mutex
	heap dueHeap[*queued]
	wake chan struct{}
}

func newAnswerQueue() *answerQueue {
	q := &answerQueue{wake: make(chan struct{}, 1)}
	go q.run()
	return q
}

func (q *answerQueue) add(item *queued) {
	q.mu.Lock()
	q.heap.push(item)
	first := q.heap.peek() == item
	q.mu.Unlock()
	if first {
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
}

func (q *answerQueue) run() {
	timer := time.NewTimer(time.Hour)
	var due []*queued
	for {
		q.mu.Lock()
		now := time.Now()
		for q.heap.Len() > 0 && !q.heap.peek().due.After(now) {
			due = append(due, q.heap.pop())
		}
		next := time.Hour
		if q.heap.Len() > 0 {
			next = q.heap.peek().due.Sub(now)
		}
		q.mu.Unlock()
		for i, item := range due {
			item.deliver()
			due[i] = nil
		}
		due = due[:0]
		timer.Reset(max(next, time.Millisecond))
		select {
		case <-timer.C:
		case <-q.wake:
		}
	}
}

// largeAnswer is the size above which an answer is written by a goroutine of its own (a slow reader of a large GET
// must not hold the others' answers).
const largeAnswer = 256 << 10

func (item *queued) deliver() {
	write := func() {
		_, _ = item.conn.conn.Write(item.data)
		item.conn.written <- struct{}{}
	}
	if len(item.data) > largeAnswer {
		go write()
	} else {
		write()
	}
}

// readHeader reads header lines up to the empty line: lower-case names, values trimmed.
func readHeader(reader *bufio.Reader) (fields, error) {
	header := make(fields, 0, 16)
	for {
		line, err := reader.ReadSlice('\n')
		if err != nil {
			if errors.Is(err, bufio.ErrBufferFull) {
				return nil, errMalformed
			}
			return nil, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			return header, nil
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 {
			return nil, errMalformed
		}
		header.add(string(bytes.ToLower(bytes.TrimSpace(line[:colon]))), string(bytes.TrimSpace(line[colon+1:])))
	}
}

func readRequest(text *textproto.Reader, reader *bufio.Reader, c *connection) (*request, error) {
	line, err := text.ReadLine()
	if err != nil {
		return nil, err
	}
	method, rest, ok1 := strings.Cut(line, " ")
	target, proto, ok2 := strings.Cut(rest, " ")
	if !ok1 || !ok2 || !strings.HasPrefix(proto, "HTTP/1.") {
		return nil, errMalformed
	}
	header, err := readHeader(reader)
	if err != nil {
		return nil, err
	}
	req := &request{Method: method, RequestURI: target, Host: header.get("host"), Header: header}
	connection := strings.ToLower(header.get("connection"))
	req.close = strings.Contains(connection, "close") || (proto == "HTTP/1.0" && !strings.Contains(connection, "keep-alive"))
	if strings.HasPrefix(target, "http://") || strings.HasPrefix(target, "https://") { // absolute form
		if _, after, found := strings.Cut(target[strings.Index(target, "//")+2:], "/"); found {
			req.RequestURI = "/" + after
		} else {
			req.RequestURI = "/"
		}
	}
	chunked := strings.Contains(strings.ToLower(header.get("transfer-encoding")), "chunked")
	length := 0
	if value := header.get("content-length"); value != "" && !chunked {
		if length, err = strconv.Atoi(strings.TrimSpace(value)); err != nil || length < 0 {
			return nil, errMalformed
		}
	}
	if (length > 0 || chunked) && strings.EqualFold(header.get("expect"), "100-continue") {
		c.settle()
		if _, err := c.conn.Write([]byte("HTTP/1.1 100 Continue\r\n\r\n")); err != nil {
			return nil, err
		}
	}
	if chunked {
		req.Body, err = readChunked(text, reader)
		return req, err
	}
	req.Body = make([]byte, length)
	if _, err := io.ReadFull(reader, req.Body); err != nil {
		return nil, err
	}
	return req, nil
}

func readChunked(text *textproto.Reader, reader *bufio.Reader) ([]byte, error) {
	var body []byte
	for {
		line, err := text.ReadLine()
		if err != nil {
			return nil, err
		}
		sizeText, _, _ := strings.Cut(line, ";")
		size, err := strconv.ParseInt(strings.TrimSpace(sizeText), 16, 64)
		if err != nil || size < 0 {
			return nil, errMalformed
		}
		if size == 0 {
			if _, err := readHeader(reader); err != nil { // trailers, up to the empty line
				return nil, errMalformed
			}
			return body, nil
		}
		start := len(body)
		body = append(body, make([]byte, size)...)
		if _, err := io.ReadFull(reader, body[start:]); err != nil {
			return nil, err
		}
		if _, err := text.ReadLine(); err != nil { // the chunk's CRLF
			return nil, err
		}
	}
}

// renderAnswer is one answer's bytes, in one buffer of its size: the status line, the headers (S3's spelling; those
// S3 adds to every answer where reply.s3), the body (none for HEAD).
func renderAnswer(req *request, reply answer) []byte {
	size := 160 + len(reply.body)
	length := false // a Content-Length given
	for _, f := range reply.headers {
		size += len(f.name) + len(f.value) + 4
		length = length || f.name == "Content-Length"
	}
	b := make([]byte, 0, size)
	b = append(strconv.AppendInt(append(b, "HTTP/1.1 "...), int64(reply.status), 10), ' ')
	b = append(append(b, http.StatusText(reply.status)...), "\r\n"...)
	for _, f := range reply.headers {
		b = append(append(append(append(b, f.name...), ": "...), f.value...), "\r\n"...)
	}
	if reply.s3 {
		b = append(append(append(b, "Date: "...), nowDate()...), "\r\nx-amz-request-id: "...)
		if reply.id != "" {
			b = append(b, reply.id...)
		} else {
			b = appendRequestID(b)
		}
		b = append(b, "\r\nServer: AmazonS3\r\n"...)
		if !length && reply.status != 204 {
			b = append(strconv.AppendInt(append(b, "Content-Length: "...), int64(len(reply.body)), 10), "\r\n"...)
		}
	}
	if req.close {
		b = append(b, "Connection: close\r\n"...)
	}
	b = append(b, "\r\n"...)
	if req.Method != "HEAD" {
		b = append(b, reply.body...)
	}
	return b
}
