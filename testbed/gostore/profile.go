package main

// The performance envelope, taken from the Python definitions (s3commit.testing._sim.profiles): a LatencyProfile's
// to_dict() and a ThrottleSpec's to_dict(), passed as JSON. The throttle is profiles.Throttle's algorithm: a token
// bucket per (bucket, partition, read/write), the first path element of the key the first partition, and a
// partition that has refused requests for split_after_seconds (a refusal at least every STREAK_GAP_SECONDS)
// splitting one level deeper.

import (
	"strings"
	"sync"
	"time"
)

// streakGapSeconds is profiles.STREAK_GAP_SECONDS: a partition's run of refusals ends after this long without one.
const streakGapSeconds = 1.0

// Profile is a LatencyProfile.to_dict().
type Profile struct {
	Name                    string             `json:"name"`
	FirstByteSeconds        map[string]float64 `json:"first_byte_seconds"`
	DefaultFirstByteSeconds float64            `json:"default_first_byte_seconds"`
	TransferBytesPerSecond  *float64           `json:"transfer_bytes_per_second"`
	CopyBytesPerSecond      *float64           `json:"copy_bytes_per_second"`
}

// FirstByte is the seconds before S3 starts answering one request of the operation.
func (p *Profile) FirstByte(operation string) float64 {
	if p == nil {
		return 0
	}
	if s, ok := p.FirstByteSeconds[operation]; ok {
		return s
	}
	return p.DefaultFirstByteSeconds
}

// Transfer is the seconds one request needs to move a body of n bytes.
func (p *Profile) Transfer(n int) float64 {
	if p == nil || p.TransferBytesPerSecond == nil || *p.TransferBytesPerSecond <= 0 || n <= 0 {
		return 0
	}
	return float64(n) / *p.TransferBytesPerSecond
}

// Copy is the seconds S3 needs to copy n bytes server-side.
func (p *Profile) Copy(n int) float64 {
	if p == nil || p.CopyBytesPerSecond == nil || *p.CopyBytesPerSecond <= 0 || n <= 0 {
		return 0
	}
	return float64(n) / *p.CopyBytesPerSecond
}

// ThrottleSpec is a ThrottleSpec.to_dict().
type ThrottleSpec struct {
	WritesPerSecond   float64  `json:"writes_per_second"`
	ReadsPerSecond    *float64 `json:"reads_per_second"`
	BurstSeconds      float64  `json:"burst_seconds"`
	SplitAfterSeconds *float64 `json:"split_after_seconds"`
}

type tokenBucket struct {
	rate, capacity, tokens, stamp float64
}

func (b *tokenBucket) tryTake(now, tokens float64) bool {
	b.tokens = min(b.capacity, b.tokens+(now-b.stamp)*b.rate)
	b.stamp = now
	needed := min(tokens, b.capacity)
	if b.tokens >= needed {
		b.tokens -= needed
		return true
	}
	return false
}

type slotKey struct {
	bucket, prefix string
	write          bool
}

type partKey struct{ bucket, prefix string }

type streak struct{ first, last float64 }

// Throttle admits or refuses requests per partition (profiles.Throttle).
type Throttle struct {
	spec    ThrottleSpec
	start   time.Time
	mu      sync.Mutex
	buckets map[slotKey]*tokenBucket
	streaks map[partKey]*streak
	split   map[partKey]bool
}

// NewThrottle makes a throttle following spec.
func NewThrottle(spec ThrottleSpec) *Throttle {
	return &Throttle{spec: spec, start: time.Now(), buckets: map[slotKey]*tokenBucket{},
		streaks: map[partKey]*streak{}, split: map[partKey]bool{}}
}

func (t *Throttle) now() float64 { return time.Since(t.start).Seconds() }

// partitionPrefix is profiles.partition_prefix: the key's first path element ("" without a "/").
func partitionPrefix(key string) string {
	if i := strings.IndexByte(key, '/'); i >= 0 {
		return key[:i]
	}
	return ""
}

// deeperPrefix is profiles.deeper_prefix: the partition of key one level below prefix, or ok=false.
func deeperPrefix(key, prefix string) (string, bool) {
	rest := key[len(prefix):]
	base := prefix
	if strings.HasPrefix(rest, "/") {
		base, rest = prefix+"/", rest[1:]
	}
	if rest == "" {
		return "", false
	}
	var element string
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		element = rest[:i]
	} else {
		element = rest[:1]
	}
	if element == "" {
		element = "/"
	}
	return base + element, true
}

func (t *Throttle) partition(bucket, key string) string {
	prefix := partitionPrefix(key)
	for t.split[partKey{bucket, prefix}] {
		deeper, ok := deeperPrefix(key, prefix)
		if !ok {
			break
		}
		prefix = deeper
	}
	return prefix
}

// Admit says whether a request may proceed (false: S3 answers 503 SlowDown); cost is the writes it counts as.
func (t *Throttle) Admit(operation, bucket, key string, cost int) bool {
	write := writeOperations[operation]
	var rate float64
	if write {
		rate = t.spec.WritesPerSecond
	} else {
		if t.spec.ReadsPerSecond == nil {
			return true
		}
		rate = *t.spec.ReadsPerSecond
	}
	if bucket == "" {
		return true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	prefix := t.partition(bucket, key)
	slot := slotKey{bucket, prefix, write}
	now := t.now()
	tb := t.buckets[slot]
	if tb == nil {
		capacity := max(1.0, rate*t.spec.BurstSeconds)
		tb = &tokenBucket{rate: rate, capacity: capacity, tokens: capacity, stamp: now}
		t.buckets[slot] = tb
	}
	if tb.tryTake(now, float64(cost)) {
		return true
	}
	t.refused(now, bucket, prefix, key)
	return false
}

func (t *Throttle) refused(now float64, bucket, prefix, key string) {
	pk := partKey{bucket, prefix}
	s := t.streaks[pk]
	if s == nil || now-s.last > streakGapSeconds {
		t.streaks[pk] = &streak{now, now}
		return
	}
	s.last = now
	after := t.spec.SplitAfterSeconds
	if after == nil || now-s.first < *after {
		return
	}
	if _, ok := deeperPrefix(key, prefix); !ok {
		return
	}
	t.split[pk] = true
	delete(t.streaks, pk)
	delete(t.buckets, slotKey{bucket, prefix, false})
	delete(t.buckets, slotKey{bucket, prefix, true})
}

// Splits lists the partitions that split, by bucket.
func (t *Throttle) Splits() map[string][]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	found := map[string][]string{}
	for pk := range t.split {
		found[pk.bucket] = append(found[pk.bucket], pk.prefix)
	}
	return found
}
