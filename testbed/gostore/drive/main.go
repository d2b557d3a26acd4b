// Command drive sends a list of HTTP/1.1 requests to a server as fast as it answers, over many keep-alive
// connections (one request at a time on each, as S3's clients send them), and reports what was answered: the
// load that measures how many requests a second the Go store can answer, which the Python client under test
// cannot send by far.
//
// Usage: drive, talked to on stdin and stdout, one line each:
//   - in: the plan, JSON: {"address": "127.0.0.1:PORT", "connections": N, "method": "POST",
//     "headers": [["Name", "value"], ...], "requests": [{"target": "/bucket/key?query", "body": "..."}, ...]}
//     (every request gets the headers given, then Content-Length);
//   - out: {"connected": N} once every connection is open;
//   - in: any line, to start;
//   - out: {"sent": n, "answered": n, "statuses": {"200": n}, "seconds": s, "error": "..."} (the error of the first
//     connection that failed, if any) once every request is answered;
//   - the connections are closed when stdin closes.
//
// So the server's work can be measured between the two answers, without the connections' opening and closing.
// It runs Go code on one thread (GOMAXPROCS 1), so that on a machine of two cores the server has the other.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type plan struct {
	Address     string      `json:"address"`
	Connections int         `json:"connections"`
	Method      string      `json:"method"`
	Headers     [][2]string `json:"headers"`
	Requests    []struct {
		Target string `json:"target"`
		Body   string `json:"body"`
	} `json:"requests"`
}

type report struct {
	Sent     int64            `json:"sent"`
	Answered int64            `json:"answered"`
	Statuses map[string]int64 `json:"statuses"`
	Seconds  float64          `json:"seconds"`
	Error    string           `json:"error,omitempty"`
}

func main() {
	runtime.GOMAXPROCS(1)
	input := bufio.NewReaderSize(os.Stdin, 1<<20)
	line, err := input.ReadBytes('\n')
	var p plan
	if err == nil || len(line) > 0 {
		err = json.Unmarshal(line, &p)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "drive: bad plan on stdin: %v\n", err)
		os.Exit(2)
	}
	if p.Connections < 1 || p.Address == "" || p.Method == "" {
		fmt.Fprintln(os.Stderr, "drive: the plan needs an address, a method and connections >= 1")
		os.Exit(2)
	}
	rendered := make([][]byte, len(p.Requests)) // rendered before the clock starts: the load is the server's
	var head strings.Builder
	for _, h := range p.Headers {
		head.WriteString(h[0] + ": " + h[1] + "\r\n")
	}
	for i, r := range p.Requests {
		rendered[i] = []byte(p.Method + " " + r.Target + " HTTP/1.1\r\n" + head.String() + "Content-Length: " +
			strconv.Itoa(len(r.Body)) + "\r\n\r\n" + r.Body)
	}
	var next, sent, answered atomic.Int64
	var mu sync.Mutex
	out := report{Statuses: map[string]int64{}}
	conns := make([]net.Conn, 0, p.Connections)
	for range min(p.Connections, max(1, len(rendered))) {
		conn, err := net.Dial("tcp", p.Address)
		if err != nil {
			fmt.Fprintf(os.Stderr, "drive: connect to %s: %v\n", p.Address, err)
			os.Exit(1)
		}
		conns = append(conns, conn)
	}
	fmt.Printf("{\"connected\": %d}\n", len(conns))
	if _, err := input.ReadBytes('\n'); err != nil {
		os.Exit(0) // (stdin closed: not asked to start)
	}
	var wg sync.WaitGroup
	started := time.Now()
	for _, conn := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses, err := sendAll(conn, rendered, p.Method == "HEAD", &next, &sent, &answered)
			mu.Lock()
			defer mu.Unlock()
			for status, n := range statuses {
				out.Statuses[status] += n
			}
			if err != nil && out.Error == "" {
				out.Error = err.Error()
			}
		}()
	}
	wg.Wait()
	out.Seconds = time.Since(started).Seconds()
	out.Sent, out.Answered = sent.Load(), answered.Load()
	text, _ := json.Marshal(out)
	fmt.Println(string(text))
	_, _ = io.Copy(io.Discard, input) // until stdin closes
	for _, conn := range conns {
		_ = conn.Close()
	}
}

// sendAll sends the requests not yet taken (next) on conn, one at a time, each answer read whole before the next
// (head: the answers are to HEADs, which have no body whatever their Content-Length).
func sendAll(conn net.Conn, rendered [][]byte, head bool, next, sent, answered *atomic.Int64) (map[string]int64, error) {
	statuses := map[string]int64{}
	reader := bufio.NewReaderSize(conn, 64<<10)
	for {
		i := next.Add(1) - 1
		if i >= int64(len(rendered)) {
			return statuses, nil
		}
		if _, err := conn.Write(rendered[i]); err != nil {
			return statuses, err
		}
		sent.Add(1)
		status, err := readAnswer(reader, head)
		if err != nil {
			return statuses, err
		}
		statuses[status]++
		answered.Add(1)
	}
}

// readAnswer reads one answer (its head, then a body of Content-Length bytes, none for a HEAD, a 204 or a 304) and
// gives its status code.
func readAnswer(reader *bufio.Reader, head bool) (string, error) {
	line, err := reader.ReadSlice('\n')
	if err != nil {
		return "", fmt.Errorf("reading an answer's status line: %w", err)
	}
	fieldsOf := strings.Fields(string(line))
	if len(fieldsOf) < 2 || !strings.HasPrefix(fieldsOf[0], "HTTP/1.") {
		return "", fmt.Errorf("not an HTTP status line: %q", line)
	}
	status, length := fieldsOf[1], 0
	for {
		line, err := reader.ReadSlice('\n')
		if err != nil {
			return "", fmt.Errorf("reading an answer's headers: %w", err)
		}
		text := strings.TrimRight(string(line), "\r\n")
		if text == "" {
			break
		}
		name, value, _ := strings.Cut(text, ":")
		if strings.EqualFold(strings.TrimSpace(name), "Content-Length") {
			if length, err = strconv.Atoi(strings.TrimSpace(value)); err != nil || length < 0 {
				return "", fmt.Errorf("a bad Content-Length: %q", value)
			}
		}
	}
	if head || status == "204" || status == "304" {
		length = 0
	}
	if _, err := io.CopyN(io.Discard, reader, int64(length)); err != nil {
		return "", fmt.Errorf("reading an answer's body: %w", err)
	}
	return status, nil
}
