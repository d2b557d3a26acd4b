//go:build linux

package main

// The event loop front end (the default, -frontend epoll): every connection served by one goroutine over Linux's
// epoll, as memory_wire's listener serves them from one asyncio loop. Level-triggered, so a request costs one read
// (no read to EAGAIN after it), one write, and its share of an epoll_wait; the answers due are written when the
// wait's timeout (the earliest due time) passes; no goroutine is woken or parked per request.
// HTTP/1.1 keep-alive, one request at a time per connection (the next handled once the answer is written), a body
// by Content-Length or chunked, "Expect: 100-continue" answered.

import (
	"bytes"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// reuseBelow is the size up to which a request is read into its connection's own buffer (larger ones grow one).
const reuseBelow = 16 << 10

// maxHead is the largest request head (request line and headers) taken.
const maxHead = 64 << 10

type loopConn struct {
	fd         int
	in         []byte // read, not yet handled
	buffer     []byte // the connection's own input buffer, for requests of up to reuseBelow bytes
	out        []byte // answer bytes not yet written
	waiting    bool   // an answer is in the timer heap
	continued  bool   // 100 Continue sent for the request being read
	closeAfter bool   // close once out is written
	watchOut   bool   // registered for EPOLLOUT
	closed     bool
	// arrived: when the kernel received the bytes that completed c.in's first request (SO_TIMESTAMPNS; zero where
	// unknown, or once that request is handled): its latency counts from then, not from when the loop reads it.
	arrived time.Time
}

type timedAnswer struct {
	due        time.Time
	conn       *loopConn
	data       []byte
	closeAfter bool
}

func (t *timedAnswer) dueAt() time.Time { return t.due }

type eventLoop struct {
	s       *Server
	epfd    int
	lfd     int
	conns   map[int]*loopConn
	timers  dueHeap[*timedAnswer]
	control [64]byte  // recvmsg's ancillary data (the receive time)
	yielded time.Time // when the loop last yielded to other goroutines
	// tick: while requests come or answers wait, the loop looks for them once a tick (0: at every arrival).
	tick time.Duration
}

// listenLoopback opens a non-blocking listening socket on 127.0.0.1:port; returns it and its port.
func listenLoopback(port int) (int, int, error) {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, 0, err
	}
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
		syscall.Close(fd)
		return -1, 0, err
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		syscall.Close(fd)
		return -1, 0, err
	}
	if err := syscall.Listen(fd, 4096); err != nil {
		syscall.Close(fd)
		return -1, 0, err
	}
	name, err := syscall.Getsockname(fd)
	if err != nil {
		syscall.Close(fd)
		return -1, 0, err
	}
	return fd, name.(*syscall.SockaddrInet4).Port, nil
}

func newEventLoop(s *Server, lfd int) (*eventLoop, error) {
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, lfd, &syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(lfd)}); err != nil {
		return nil, err
	}
	return &eventLoop{s: s, epfd: epfd, lfd: lfd, conns: map[int]*loopConn{}}, nil
}

func (l *eventLoop) run() error {
	events := make([]syscall.EpollEvent, 512)
	busy := false
	for {
		timeout := time.Duration(-1)
		if l.timers.Len() > 0 {
			timeout = max(0, time.Until(l.timers.peek().due))
		}
		if busy && l.tick > 0 && timeout != 0 { // busy: look once a tick, not at every arrival
			pause := l.tick
			if timeout > 0 {
				pause = min(pause, timeout)
			}
			sleepRaw(pause)
			timeout = 0
		}
		n, err := l.wait(events, timeout)
		busy = n > 0 || l.timers.Len() > 0
		if err != nil && !errors.Is(err, syscall.EINTR) {
			return err
		}
		for i := 0; i < n; i++ {
			fd := int(events[i].Fd)
			if fd == l.lfd {
				l.accept()
				continue
			}
			c := l.conns[fd]
			if c == nil {
				continue
			}
			if events[i].Events&syscall.EPOLLOUT != 0 {
				l.flush(c)
			}
			if events[i].Events&(syscall.EPOLLIN|syscall.EPOLLHUP|syscall.EPOLLERR) != 0 && !c.closed {
				l.readable(c)
			}
		}
		l.due()
	}
}

// wait is epoll_wait, as a raw system call when it may block: the runtime is not told (a goroutine blocked in a
// system call has its P handed off and a thread started spinning, a futex wake-up each time the loop waits), and
// the loop yields to any other goroutine every maxWait. It waits at most maxWait, so that the runtime's own work
// (the collector, the stdin watcher) runs. The timeout is the next answer's due time to the nanosecond
// (epoll_pwait2, Linux 5.11): epoll_wait's whole milliseconds, rounded up, made every answer up to 1 ms later than
// its profile's latency (0.5 ms on average: 2% of a Complete's 50 ms, in every wave of a job commit).
func (l *eventLoop) wait(events []syscall.EpollEvent, timeout time.Duration) (int, error) {
	if timeout < 0 || timeout > maxWait*time.Millisecond {
		timeout = maxWait * time.Millisecond
	}
	l.s.waits.Add(1)
	var r uintptr
	var errno syscall.Errno
	if !noPwait2 {
		spec := syscall.NsecToTimespec(timeout.Nanoseconds())
		r, _, errno = syscall.RawSyscall6(sysEpollPwait2, uintptr(l.epfd), uintptr(unsafe.Pointer(&events[0])),
			uintptr(len(events)), uintptr(unsafe.Pointer(&spec)), 0, 0)
		if errno == syscall.ENOSYS {
			noPwait2 = true
		}
	}
	if noPwait2 { // epoll_pwait with no signal mask: epoll_wait, which arm64 has under this name only
		r, _, errno = syscall.RawSyscall6(syscall.SYS_EPOLL_PWAIT, uintptr(l.epfd), uintptr(unsafe.Pointer(&events[0])),
			uintptr(len(events)), uintptr((timeout+time.Millisecond-1)/time.Millisecond), 0, 0)
	}
	if now := time.Now(); now.Sub(l.yielded) >= maxWait*time.Millisecond {
		l.yielded = now
		runtime.Gosched()
	}
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}

// sysEpollPwait2 is epoll_pwait2's number (the same on amd64 and arm64); noPwait2: the kernel has none (older than
// 5.11), so the loop waits in epoll_wait's milliseconds.
const sysEpollPwait2 = 441

var noPwait2 bool

// sleepRaw sleeps in nanosleep, a raw system call (the runtime, told, would hand the P off).
func sleepRaw(pause time.Duration) {
	spec := syscall.NsecToTimespec(pause.Nanoseconds())
	_, _, _ = syscall.RawSyscall(syscall.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&spec)), 0, 0)
}

// maxWait is the longest epoll_wait, in milliseconds.
const maxWait = 10

func (l *eventLoop) accept() {
	for {
		fd, _, err := syscall.Accept4(l.lfd, syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC)
		if err != nil {
			return // EAGAIN: none left (other errors: the client gave up)
		}
		_ = syscall.SetsockoptInt(fd, syscall.IPPROTO_TCP, syscall.TCP_NODELAY, 1)
		_ = syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1)
		if err := syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_ADD, fd, &syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(fd)}); err != nil {
			syscall.Close(fd)
			continue
		}
		c := &loopConn{fd: fd, buffer: make([]byte, 0, reuseBelow)}
		c.in = c.buffer[:0]
		l.conns[fd] = c
		l.s.connections.Add(1)
	}
}

func (l *eventLoop) close(c *loopConn) {
	if c.closed {
		return
	}
	c.closed = true
	_ = syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_DEL, c.fd, nil)
	syscall.Close(c.fd)
	delete(l.conns, c.fd)
}

func (l *eventLoop) readable(c *loopConn) {
	for {
		if cap(c.in)-len(c.in) < minRead { // room for what comes: the connection's buffer, else a grown one
			grown := make([]byte, len(c.in), max(2*cap(c.in), len(c.in)+readGrowth))
			copy(grown, c.in)
			c.in = grown
		}
		room := c.in[len(c.in):cap(c.in)]
		l.s.reads.Add(1)
		n, err := l.receive(c, room)
		if err != nil {
			if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EINTR) {
				break
			}
			l.close(c)
			return
		}
		if n == 0 {
			l.close(c)
			return
		}
		c.in = c.in[:len(c.in)+n]
		if n < len(room) {
			break
		}
	}
	l.process(c)
}

// receive reads what c's socket holds into room (recvmsg), noting in c.arrived when the kernel received it.
func (l *eventLoop) receive(c *loopConn, room []byte) (int, error) {
	n, controlled, _, _, err := syscall.Recvmsg(c.fd, room, l.control[:], 0)
	if err != nil {
		return 0, err
	}
	// One control message, SCM_TIMESTAMPNS: a cmsghdr (length, level, type) then a timespec.
	const header = unsafe.Sizeof(syscall.Cmsghdr{})
	if uintptr(controlled) >= header+unsafe.Sizeof(syscall.Timespec{}) {
		h := (*syscall.Cmsghdr)(unsafe.Pointer(&l.control[0]))
		if h.Level == syscall.SOL_SOCKET && h.Type == syscall.SCM_TIMESTAMPNS {
			t := (*syscall.Timespec)(unsafe.Pointer(&l.control[header]))
			c.arrived = time.Unix(int64(t.Sec), int64(t.Nsec)) // (int32 fields on 32-bit systems)
		}
	}
	return n, nil
}

// minRead is the least room a read is given; readGrowth how much a connection's input grows by at least.
const (
	minRead    = 4 << 10
	readGrowth = 256 << 10
)

// flush writes what it can of c.out; watches for writability while some is left.
func (l *eventLoop) flush(c *loopConn) {
	for len(c.out) > 0 && !c.closed {
		l.s.writes.Add(1)
		n, err := syscall.Write(c.fd, c.out)
		if err != nil {
			if errors.Is(err, syscall.EAGAIN) {
				l.watch(c, true)
				return
			}
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			l.close(c)
			return
		}
		c.out = c.out[n:]
	}
	if c.closed {
		return
	}
	c.out = nil
	l.watch(c, false)
	if c.closeAfter {
		l.close(c)
		return
	}
	if !c.waiting && len(c.in) > 0 {
		l.process(c)
	}
}

func (l *eventLoop) watch(c *loopConn, out bool) {
	if c.watchOut == out {
		return
	}
	c.watchOut = out
	events := uint32(syscall.EPOLLIN)
	if out {
		events |= syscall.EPOLLOUT
	}
	_ = syscall.EpollCtl(l.epfd, syscall.EPOLL_CTL_MOD, c.fd, &syscall.EpollEvent{Events: events, Fd: int32(c.fd)})
}

func (l *eventLoop) send(c *loopConn, data []byte) {
	if len(c.out) == 0 {
		c.out = data // (the answer's own bytes: nothing else holds them)
	} else {
		c.out = append(c.out, data...)
	}
	l.flush(c)
}

// process handles the requests c.in holds whole, one at a time (the next once the answer is written).
func (l *eventLoop) process(c *loopConn) {
	for !c.closed && !c.waiting && len(c.out) == 0 && len(c.in) > 0 {
		req, consumed, err := parseRequest(c.in)
		if err != nil {
			c.closeAfter = true
			l.send(c, []byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
			return
		}
		if req == nil { // not whole yet
			if consumed > 0 && !c.continued { // the head is whole, asking for 100 Continue
				c.continued = true
				l.send(c, []byte("HTTP/1.1 100 Continue\r\n\r\n"))
			}
			return
		}
		c.continued = false
		c.in = c.in[consumed:]
		if len(c.in) == 0 {
			c.in = c.in[:0:0]
			if consumed <= reuseBelow {
				c.in = c.buffer[:0]
			}
		}
		arrived := time.Now()
		if !c.arrived.IsZero() && c.arrived.Before(arrived) {
			arrived = c.arrived
		}
		c.arrived = time.Time{} // (a request read with this one waits for its answer: its latency counts from then)
		reply, delay := l.s.handle(req)
		data := renderAnswer(req, reply)
		if delay <= 0 {
			c.closeAfter = req.close
			l.send(c, data)
			continue
		}
		c.waiting = true
		l.timers.push(&timedAnswer{due: arrived.Add(time.Duration(delay * float64(time.Second))), conn: c, data: data,
			closeAfter: req.close})
	}
}

// due writes the answers whose time has come.
func (l *eventLoop) due() {
	now := time.Now()
	for l.timers.Len() > 0 && !l.timers.peek().due.After(now) {
		item := l.timers.pop()
		c := item.conn
		if c.closed {
			continue
		}
		c.waiting = false
		c.closeAfter = item.closeAfter
		l.send(c, item.data)
	}
}

// parseRequest reads one request from the start of data: the request and the bytes it took; (nil, 0, nil) when
// it is not whole yet, (nil, >0, nil) when its head is whole, asks "Expect: 100-continue", and its body is not.
func parseRequest(data []byte) (*request, int, error) {
	end := bytes.Index(data, []byte("\r\n\r\n"))
	if end < 0 {
		if len(data) > maxHead {
			return nil, 0, errMalformed
		}
		return nil, 0, nil
	}
	head := string(data[:end])
	first, lines, _ := strings.Cut(head, "\r\n")
	method, rest, ok1 := strings.Cut(first, " ")
	target, proto, ok2 := strings.Cut(rest, " ")
	if !ok1 || !ok2 || !strings.HasPrefix(proto, "HTTP/1.") {
		return nil, 0, errMalformed
	}
	req := &request{Method: method, RequestURI: absolutePath(target)}
	header := fields(req.held[:0])
	for lines != "" {
		var line string
		line, lines, _ = strings.Cut(lines, "\r\n")
		name, value, found := strings.Cut(line, ":")
		if !found || name == "" {
			return nil, 0, errMalformed
		}
		header.add(lowerName(strings.TrimSpace(name)), strings.TrimSpace(value))
	}
	req.Host, req.Header = header.get("host"), header
	connection := strings.ToLower(header.get("connection"))
	req.close = strings.Contains(connection, "close") || (proto == "HTTP/1.0" && !strings.Contains(connection, "keep-alive"))
	start := end + 4
	expects := strings.EqualFold(header.get("expect"), "100-continue")
	notYet := -1
	if expects {
		notYet = start
	}
	if strings.Contains(strings.ToLower(header.get("transfer-encoding")), "chunked") {
		body, consumed, complete, err := chunkedBody(data[start:])
		if err != nil {
			return nil, 0, err
		}
		if !complete {
			return nil, max(0, notYet), nil
		}
		req.Body = body
		return req, start + consumed, nil
	}
	length := 0
	if value := header.get("content-length"); value != "" {
		n, err := strconv.Atoi(value)
		if err != nil || n < 0 {
			return nil, 0, errMalformed
		}
		length = n
	}
	if len(data)-start < length {
		return nil, max(0, notYet), nil
	}
	req.Body = append([]byte(nil), data[start:start+length]...)
	return req, start + length, nil
}

// lowerNames are the header names S3's clients send, lower-cased once (strings.ToLower makes a string each time).
var lowerNames = map[string]string{}

func init() {
	for _, name := range []string{"Host", "User-Agent", "Accept-Encoding", "Content-Length", "Content-Type",
		"Content-MD5", "Authorization", "X-Amz-Date", "X-Amz-Content-SHA256", "X-Amz-Security-Token", "Expect",
		"Connection", "Transfer-Encoding", "If-None-Match", "If-Match", "Amz-Sdk-Invocation-Id", "Amz-Sdk-Request",
		"X-Amz-Copy-Source", "Range", "Accept", "Content-Encoding", "X-Amz-Decoded-Content-Length",
		"X-Amz-Checksum-Crc32", "X-Amz-Checksum-Crc32c", "X-Amz-Checksum-Sha256", "X-Amz-Sdk-Checksum-Algorithm"} {
		lowerNames[name] = strings.ToLower(name)
	}
}

// lowerName is a header's name in lower case.
func lowerName(name string) string {
	if lower, ok := lowerNames[name]; ok {
		return lower
	}
	return strings.ToLower(name)
}

// absolutePath is a request target's origin form ("/path?query" of "http://host/path?query").
func absolutePath(target string) string {
	if !strings.HasPrefix(target, "http://") && !strings.HasPrefix(target, "https://") {
		return target
	}
	if _, after, found := strings.Cut(target[strings.Index(target, "//")+2:], "/"); found {
		return "/" + after
	}
	return "/"
}

// chunkedBody decodes a chunked body at the start of data: the body, the bytes it took, whether it is whole.
func chunkedBody(data []byte) ([]byte, int, bool, error) {
	var body []byte
	at := 0
	for {
		lineEnd := bytes.Index(data[at:], []byte("\r\n"))
		if lineEnd < 0 {
			return nil, 0, false, nil
		}
		sizeText, _, _ := strings.Cut(string(data[at:at+lineEnd]), ";")
		size, err := strconv.ParseInt(strings.TrimSpace(sizeText), 16, 64)
		if err != nil || size < 0 {
			return nil, 0, false, errMalformed
		}
		at += lineEnd + 2
		if size == 0 { // trailers, up to the empty line
			for {
				lineEnd := bytes.Index(data[at:], []byte("\r\n"))
				if lineEnd < 0 {
					return nil, 0, false, nil
				}
				at += lineEnd + 2
				if lineEnd == 0 {
					return body, at, true, nil
				}
			}
		}
		if int64(len(data)-at) < size+2 {
			return nil, 0, false, nil
		}
		body = append(body, data[at:at+int(size)]...)
		at += int(size) + 2
	}
}
