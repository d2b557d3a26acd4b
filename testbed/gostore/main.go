// Command gostore is a simulated S3 for the commit path at scale: s3commit.testing.memory's model answered as
// s3commit.testing.memory_wire renders it (XML documents, headers, error codes and statuses), on 127.0.0.1 over
// HTTP/1.1, with a LatencyProfile's waits and a ThrottleSpec's per-partition rates taken from the Python
// definitions (JSON on the command line). Signatures are not checked. A request's effect applies when it arrives;
// its answer is written once its latency has passed.
//
// Usage: gostore [-config JSON] [-port N]. It prints {"url": "http://127.0.0.1:PORT"} once listening and exits when
// its stdin closes. Admin endpoints live under /_gostore/ (no bucket name starts with "_"): stats, seed, put,
// counts, buckets.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Config is what the Python side passes: LatencyProfile.to_dict() (or null), ThrottleSpec.to_dict() (or null),
// and whether conditional requests are honoured.
type Config struct {
	Profile     *Profile      `json:"profile"`
	Throttle    *ThrottleSpec `json:"throttle"`
	Conditional *bool         `json:"conditional"`
}

// Server answers S3's requests over its store.
type Server struct {
	store    *Store
	queue    *answerQueue
	profile  *Profile
	throttle *Throttle
	url      string

	countMu   sync.Mutex
	requests  map[string]int64
	slowdowns map[string]int64
	answered  atomic.Int64
	// connections counts the connections accepted.
	connections atomic.Int64
	// waits, reads and writes count the event loop's system calls (epoll_wait, read, write).
	waits, reads, writes atomic.Int64
}

func main() {
	configText := flag.String("config", "{}", "JSON: {\"profile\": LatencyProfile.to_dict(), \"throttle\": ThrottleSpec.to_dict(), \"conditional\": true}")
	port := flag.Int("port", 0, "the port on 127.0.0.1 (0: one the OS chooses)")
	procs := flag.Int("procs", 1, "GOMAXPROCS: the threads running Go code at once (1: no thread woken for another's "+
		"work, the fewest CPU-seconds per answer; about 16,000 answers a second on one core)")
	frontend := flag.String("frontend", "epoll", "epoll: one event loop serves every connection (Linux); "+
		"goroutines: a goroutine a connection (net's poller)")
	tick := flag.Duration("tick", 0, "epoll front end: while busy, look for requests once a tick (e.g. 1ms: fewer "+
		"wake-ups, each request up to a tick later) instead of at every arrival (0)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile (runtime/pprof) here until stdin closes")
	flag.Parse()
	if *procs > 0 {
		runtime.GOMAXPROCS(*procs)
	}
	var config Config
	if err := json.Unmarshal([]byte(*configText), &config); err != nil {
		fmt.Fprintf(os.Stderr, "gostore: bad -config: %v\n", err)
		os.Exit(2)
	}
	if config.Throttle != nil && config.Throttle.BurstSeconds == 0 {
		config.Throttle.BurstSeconds = 1
	}
	var serve func(*Server) error
	var url string
	switch *frontend {
	case "epoll":
		lfd, bound, err := listenLoopback(*port)
		if err != nil {
			fail("listen", err)
		}
		url = fmt.Sprintf("http://127.0.0.1:%d", bound)
		serve = func(s *Server) error {
			loop, err := newEventLoop(s, lfd)
			if err != nil {
				return err
			}
			loop.tick = *tick
			return loop.run()
		}
	case "goroutines":
		listener, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *port))
		if err != nil {
			fail("listen", err)
		}
		url = "http://" + listener.Addr().String()
		serve = func(s *Server) error {
			s.queue = newAnswerQueue()
			return s.serve(listener)
		}
	default:
		fail("-frontend", fmt.Errorf("%q is neither epoll nor goroutines", *frontend))
	}
	server := newServer(config, url)
	if *cpuProfile != "" {
		out, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(out)
		}
		if err != nil {
			fail("-cpuprofile", err)
		}
	}
	go func() { // die with the parent: its end of our stdin closes
		_, _ = io.Copy(io.Discard, os.Stdin)
		pprof.StopCPUProfile()
		os.Exit(0)
	}()
	ready, _ := json.Marshal(map[string]string{"url": server.url})
	fmt.Println(string(ready))
	if err := serve(server); err != nil {
		fail("serve", err)
	}
}

func fail(what string, err error) {
	fmt.Fprintf(os.Stderr, "gostore: %s: %v\n", what, err)
	os.Exit(1)
}

func newServer(config Config, url string) *Server {
	conditional := config.Conditional == nil || *config.Conditional
	s := &Server{store: NewStore(conditional), profile: config.Profile, url: url,
		requests: map[string]int64{}, slowdowns: map[string]int64{}}
	if config.Throttle != nil {
		s.throttle = NewThrottle(*config.Throttle)
	}
	return s
}

func (s *Server) count(operation string, slowdown bool) {
	s.countMu.Lock()
	s.requests[operation]++
	if slowdown {
		s.slowdowns[operation]++
	}
	s.countMu.Unlock()
	s.answered.Add(1)
}

// wait sleeps seconds (the request's latency) in this request's goroutine.
func wait(seconds float64) {
	if seconds > 0 {
		time.Sleep(time.Duration(seconds * float64(time.Second)))
	}
}

// --- admin -------------------------------------------------------------------------------------------------------

func jsonAnswer(status int, value any) answer {
	body, err := json.Marshal(value)
	if err != nil {
		status, body = 500, []byte(fmt.Sprintf(`{"error": %q}`, err.Error()))
	}
	return answer{status: status, body: body,
		headers: fields{{"Content-Type", "application/json"}, {"Content-Length", strconv.Itoa(len(body))}}}
}

func (s *Server) admin(name string, query url.Values, body []byte) answer {
	switch name {
	case "stats":
		return jsonAnswer(200, s.stats())
	case "buckets":
		return jsonAnswer(200, s.store.BucketNames())
	case "counts":
		return jsonAnswer(200, s.store.Counts(query.Get("bucket"), query.Get("prefix"), query["contains"]))
	case "seed":
		var request struct {
			Bucket string   `json:"bucket"`
			Keys   []string `json:"keys"`
			Body   string   `json:"body"`
		}
		if err := json.Unmarshal(body, &request); err != nil {
			return jsonAnswer(400, map[string]string{"error": err.Error()})
		}
		made, err := s.store.Seed(request.Bucket, request.Keys, []byte(request.Body))
		if err != nil {
			return jsonAnswer(404, map[string]string{"error": err.Error()})
		}
		return jsonAnswer(200, map[string]any{"uploads": made})
	case "put":
		var request struct {
			Bucket  string            `json:"bucket"`
			Objects map[string]string `json:"objects"`
		}
		if err := json.Unmarshal(body, &request); err != nil {
			return jsonAnswer(400, map[string]string{"error": err.Error()})
		}
		objects := make(map[string][]byte, len(request.Objects))
		for key, text := range request.Objects {
			objects[key] = []byte(text)
		}
		etags, err := s.store.PutMany(request.Bucket, objects)
		if err != nil {
			return jsonAnswer(404, map[string]string{"error": err.Error()})
		}
		return jsonAnswer(200, map[string]any{"etags": etags})
	}
	return jsonAnswer(404, map[string]string{"error": "no admin endpoint " + name})
}

func (s *Server) stats() map[string]any {
	var usage syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &usage)
	seconds := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	s.countMu.Lock()
	requests := make(map[string]int64, len(s.requests))
	var total, slowdownTotal int64
	for op, n := range s.requests {
		requests[op] = n
		total += n
	}
	slowdowns := make(map[string]int64, len(s.slowdowns))
	for op, n := range s.slowdowns {
		slowdowns[op] = n
		slowdownTotal += n
	}
	s.countMu.Unlock()
	splits := map[string][]string{}
	splitCount := 0
	if s.throttle != nil {
		splits = s.throttle.Splits()
		for _, prefixes := range splits {
			splitCount += len(prefixes)
		}
	}
	return map[string]any{
		"requests": requests, "requests_total": total, "slowdowns": slowdowns, "slowdowns_answered": slowdownTotal,
		"partitions_split": splitCount, "splits": splits, "connections_accepted": s.connections.Load(),
		"system_calls": map[string]int64{"epoll_wait": s.waits.Load(), "read": s.reads.Load(), "write": s.writes.Load()},
		"cpu_seconds":  seconds(usage.Utime) + seconds(usage.Stime),
		"user_seconds": seconds(usage.Utime), "system_seconds": seconds(usage.Stime),
		"peak_rss_mib": float64(usage.Maxrss) / 1024,
	}
}
