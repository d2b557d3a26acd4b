package main

// The store's contents, as s3commit.testing.memory.MemoryS3 models them: buckets of objects, multipart uploads and
// the uploads completed (a repeated Complete answered with its ETag), conditional writes (If-None-Match: * and
// If-Match), part ETags the MD5 of their bytes and S3's multipart ETag, listings sorted and paged.

import (
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// page is S3's page of ListObjectsV2 and ListMultipartUploads.
const page = 1000

const precondition = "At least one of the pre-conditions you specified did not hold"

type object struct {
	body        []byte
	etag        string
	modified    time.Time
	contentType string
}

type part struct {
	body []byte
	etag string
}

// upload is a multipart upload; once completed, it stays (its parts dropped) so that a repeated Complete is answered
// with its ETag, and is outstanding no more (one map for both: a Complete costs no insertion of its own).
type upload struct {
	bucket, key, id string
	initiated       time.Time
	parts           map[int]part
	completed       bool
	etag            string // the object's, once completed
}

// keyIndex keeps a bucket's keys in order lazily (memory._KeyIndex): new keys (fresh, in no order) are sorted into a
// short run of their own (recent) at the next listing, and that run merged into the rest (sorted) only once it holds
// an eighth as many keys, or half of those are gone; a listing reads both runs at once. So a listing while keys are
// written costs the short run, not every key (a merge of all 200,000 keys at each page of an overwrite's listing beside
// its Completes held the store's one loop for 0.4 s, and every Complete in flight with it).
type keyIndex struct {
	sorted []string
	recent []string
	fresh  []string
	gone   int
}

type bucket struct {
	objects map[string]*object
	index   keyIndex
}

// S3Error is an error S3 answers with: its code, HTTP status and message.
type S3Error struct {
	Code    string
	Status  int
	Message string
}

func (e *S3Error) Error() string { return e.Code + ": " + e.Message }

func s3err(code string, status int, message string) *S3Error {
	return &S3Error{Code: code, Status: status, Message: message}
}

var (
	errNoSuchKey    = s3err("NoSuchKey", 404, "The specified key does not exist.")
	errNoSuchUpload = s3err("NoSuchUpload", 404, "The specified upload does not exist.")
	errPrecondition = s3err("PreconditionFailed", 412, precondition)
)

// Store is the model, one lock around it (each request holds it for microseconds).
type Store struct {
	mu          sync.Mutex
	conditional bool
	buckets     map[string]*bucket
	uploads     map[string]*upload // outstanding and completed
	ids         int
	last        time.Time
}

// NewStore makes an empty store; conditional: honour If-None-Match / If-Match.
func NewStore(conditional bool) *Store {
	return &Store{conditional: conditional, buckets: map[string]*bucket{}, uploads: map[string]*upload{}}
}

// now is the store's clock: this host's, strictly increasing (objects written one after another are ordered).
func (s *Store) now() time.Time {
	t := time.Now().UTC()
	if !t.After(s.last) {
		t = s.last.Add(time.Microsecond)
	}
	s.last = t
	return t
}

func etagOf(body []byte) string {
	sum := md5.Sum(body)
	return `"` + hex.EncodeToString(sum[:]) + `"`
}

// multipartETag is object_info.multipart_etag: md5 of the parts' binary md5s, "-N".
func multipartETag(parts []CompletedPart) string {
	var held [md5.Size * 4]byte // (most uploads have a few parts: their digests on the stack)
	digests := held[:0]
	for _, p := range parts {
		var err error
		if digests, err = hex.AppendDecode(digests, []byte(strings.Trim(p.ETag, `"`))); err != nil {
			return `"?"`
		}
	}
	sum := md5.Sum(digests)
	var text [48]byte
	etag := append(hex.AppendEncode(append(text[:0], '"'), sum[:]), '-')
	return string(append(strconv.AppendInt(etag, int64(len(parts)), 10), '"'))
}

// CreateBucket makes a bucket (nothing if it exists).
func (s *Store) CreateBucket(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.buckets[name] == nil {
		s.buckets[name] = &bucket{objects: map[string]*object{}}
	}
}

// BucketNames lists the buckets, sorted.
func (s *Store) BucketNames() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.buckets))
	for name := range s.buckets {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

func (s *Store) bucket(name string) (*bucket, error) {
	b := s.buckets[name]
	if b == nil {
		return nil, s3err("NoSuchBucket", 404, "The specified bucket does not exist: "+name)
	}
	return b, nil
}

func (s *Store) put(b *bucket, key string, body []byte, etag, contentType string, when time.Time) {
	s.putOver(b, key, b.objects[key], body, etag, contentType, when)
}

// putOver is put where the object at key is known (current: nil where there is none).
func (s *Store) putOver(b *bucket, key string, current *object, body []byte, etag, contentType string, when time.Time) {
	if current == nil {
		b.index.fresh = append(b.index.fresh, key)
	}
	if contentType == "" {
		contentType = "binary/octet-stream"
	}
	b.objects[key] = &object{body: body, etag: etag, modified: when, contentType: contentType}
}

func (s *Store) checkConditions(current *object, ifNoneMatch, ifMatch *string) error {
	if !s.conditional {
		return nil
	}
	if ifNoneMatch != nil && *ifNoneMatch == "*" && current != nil {
		return errPrecondition
	}
	if ifMatch != nil {
		if current == nil {
			return errNoSuchKey
		}
		if current.etag != *ifMatch {
			return errPrecondition
		}
	}
	return nil
}

// HeadBucket answers whether the bucket exists.
func (s *Store) HeadBucket(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.buckets[name] == nil {
		return s3err("404", 404, "Not Found")
	}
	return nil
}

// PutObject stores body at key, under the conditions; returns its ETag.
func (s *Store) PutObject(bucketName, key string, body []byte, contentType string, ifNoneMatch, ifMatch *string) (string, error) {
	etag := etagOf(body)
	s.mu.Lock()
	defer s.mu.Unlock()
	b, err := s.bucket(bucketName)
	if err != nil {
		return "", err
	}
	if err := s.checkConditions(b.objects[key], ifNoneMatch, ifMatch); err != nil {
		return "", err
	}
	s.put(b, key, body, etag, contentType, s.now())
	return etag, nil
}

// Object is one object's contents, for GET and HEAD (the body is never changed in place: a PUT replaces it).
func (s *Store) Object(bucketName, key string, head bool) (*object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now()
	b, err := s.bucket(bucketName)
	if err != nil {
		return nil, err
	}
	found := b.objects[key]
	if found == nil {
		if head {
			return nil, s3err("404", 404, "Not Found")
		}
		return nil, errNoSuchKey
	}
	return found, nil
}

// Size is an object's size, -1 when there is none.
func (s *Store) Size(bucketName, key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.buckets[bucketName]; b != nil {
		if found := b.objects[key]; found != nil {
			return len(found.body)
		}
	}
	return -1
}

// DeleteObject deletes key (If-Match honoured).
func (s *Store) DeleteObject(bucketName, key string, ifNoneMatch, ifMatch *string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now()
	b, err := s.bucket(bucketName)
	if err != nil {
		return err
	}
	current := b.objects[key]
	if err := s.checkConditions(current, ifNoneMatch, ifMatch); err != nil {
		return err
	}
	if current != nil {
		delete(b.objects, key)
		b.index.gone++
	}
	return nil
}

// DeleteEntry is one key of a DeleteObjects, with its ETag condition.
type DeleteEntry struct {
	Key  string  `xml:"Key"`
	ETag *string `xml:"ETag"`
}

// DeleteError is one key a DeleteObjects did not delete.
type DeleteError struct{ Key, Code, Message string }

// DeleteObjects deletes the keys (each one's ETag condition honoured); returns the keys it refused.
func (s *Store) DeleteObjects(bucketName string, entries []DeleteEntry) ([]DeleteError, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now()
	b, err := s.bucket(bucketName)
	if err != nil {
		return nil, err
	}
	var refused []DeleteError
	for _, entry := range entries {
		current := b.objects[entry.Key]
		if s.conditional && entry.ETag != nil && current != nil && current.etag != *entry.ETag {
			refused = append(refused, DeleteError{entry.Key, "PreconditionFailed", "ETag changed"})
			continue
		}
		if current != nil {
			delete(b.objects, entry.Key)
			b.index.gone++
		}
	}
	return refused, nil
}

// CopyObject copies an object; returns its ETag and date.
func (s *Store) CopyObject(bucketName, key, sourceBucket, sourceKey string) (string, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	when := s.now()
	source, err := s.bucket(sourceBucket)
	if err != nil {
		return "", when, err
	}
	found := source.objects[sourceKey]
	if found == nil {
		return "", when, errNoSuchKey
	}
	b, err := s.bucket(bucketName)
	if err != nil {
		return "", when, err
	}
	s.put(b, key, found.body, found.etag, found.contentType, when)
	return found.etag, when, nil
}

// ListEntry is one entry of a listing: an object, or a common prefix (obj nil).
type ListEntry struct {
	Key string
	obj *object
}

// ListResult is one page of ListObjectsV2.
type ListResult struct {
	Entries   []ListEntry
	Truncated bool
	NextToken string
}

func (ix *keyIndex) refresh(objects map[string]*object) {
	if len(ix.fresh) > 0 {
		sort.Strings(ix.fresh)
		ix.recent, ix.fresh = mergeKeys(ix.recent, ix.fresh, nil), nil
	}
	if len(ix.recent) > len(ix.sorted)/8 || ix.gone > len(ix.sorted)/2 {
		ix.sorted, ix.recent, ix.gone = mergeKeys(ix.sorted, ix.recent, objects), nil, 0
	}
}

// mergeKeys is two sorted runs of keys as one, each key once; with objects, only the keys still there.
func mergeKeys(a, b []string, objects map[string]*object) []string {
	merged := make([]string, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		var next string
		if j >= len(b) || (i < len(a) && a[i] <= b[j]) {
			next = a[i]
			i++
		} else {
			next = b[j]
			j++
		}
		if len(merged) > 0 && merged[len(merged)-1] == next {
			continue
		}
		if objects != nil {
			if _, ok := objects[next]; !ok {
				continue
			}
		}
		merged = append(merged, next)
	}
	return merged
}

// from is where a listing starts in a sorted run of keys: after the token (or startAfter), else at the prefix.
func from(keys []string, prefix, after string, hasAfter bool) int {
	if hasAfter && after >= prefix {
		return sort.Search(len(keys), func(i int) bool { return keys[i] > after })
	}
	return sort.SearchStrings(keys, prefix)
}

// ListObjects is ListObjectsV2 over the model (memory.MemoryS3.list_objects_v2): the keys under prefix after the
// token (a key or common prefix) or after startAfter, common prefixes rolled up by the delimiter.
func (s *Store) ListObjects(bucketName, prefix, delimiter, token, startAfter string, maxKeys int) (*ListResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now()
	b, err := s.bucket(bucketName)
	if err != nil {
		return nil, err
	}
	b.index.refresh(b.objects)
	keys, recent := b.index.sorted, b.index.recent
	after, hasAfter := token, token != ""
	if !hasAfter && startAfter != "" {
		after, hasAfter = startAfter, true
	}
	i, j := from(keys, prefix, after, hasAfter), from(recent, prefix, after, hasAfter)
	var entries []ListEntry
	for i < len(keys) || j < len(recent) {
		var key string
		if j >= len(recent) || (i < len(keys) && keys[i] <= recent[j]) {
			key = keys[i]
			i++
			if j < len(recent) && recent[j] == key {
				j++
			}
		} else {
			key = recent[j]
			j++
		}
		if !strings.HasPrefix(key, prefix) {
			break
		}
		found := b.objects[key]
		if found == nil {
			continue
		}
		cut := -1
		if delimiter != "" {
			if i := strings.Index(key[len(prefix):], delimiter); i >= 0 {
				cut = len(prefix) + i
			}
		}
		if cut >= 0 {
			common := key[:cut+len(delimiter)]
			if common != token && (len(entries) == 0 || entries[len(entries)-1] != ListEntry{Key: common}) {
				entries = append(entries, ListEntry{Key: common})
			}
		} else {
			entries = append(entries, ListEntry{Key: key, obj: found})
		}
		if len(entries) > maxKeys {
			break
		}
	}
	result := &ListResult{Entries: entries}
	if len(entries) > maxKeys {
		result.Entries, result.Truncated = entries[:maxKeys], true
		if maxKeys > 0 {
			result.NextToken = entries[maxKeys-1].Key
		} else {
			result.Truncated = false
		}
	}
	return result, nil
}

// CreateUpload starts a multipart upload; returns its id.
func (s *Store) CreateUpload(bucketName, key string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	when := s.now()
	if _, err := s.bucket(bucketName); err != nil {
		return "", err
	}
	return s.createUpload(bucketName, key, when), nil
}

func (s *Store) createUpload(bucketName, key string, when time.Time) string {
	s.ids++
	sum := md5.Sum([]byte(key))
	id := fmt.Sprintf("upload-%06d-%s", s.ids, hex.EncodeToString(sum[:])[:8])
	s.uploads[id] = &upload{bucket: bucketName, key: key, id: id, initiated: when, parts: map[int]part{}}
	return id
}

func (s *Store) upload(bucketName, key, id string) (*upload, error) {
	found := s.uploads[id]
	if found == nil || found.completed || found.bucket != bucketName || found.key != key {
		return nil, errNoSuchUpload
	}
	return found, nil
}

// UploadPart stores one part; returns its ETag.
func (s *Store) UploadPart(bucketName, key, id string, number int, body []byte) (string, error) {
	etag := etagOf(body)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now()
	found, err := s.upload(bucketName, key, id)
	if err != nil {
		return "", err
	}
	found.parts[number] = part{body, etag}
	return etag, nil
}

// CompletedPart is one part a Complete names.
type CompletedPart struct {
	PartNumber int    `xml:"PartNumber"`
	ETag       string `xml:"ETag"`
}

// Complete completes an upload from the parts named (memory.MemoryS3.complete_multipart_upload); returns its ETag.
func (s *Store) Complete(bucketName, key, id string, parts []CompletedPart, ifNoneMatch, ifMatch *string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	when := s.now()
	found := s.uploads[id]
	if found == nil || found.bucket != bucketName || found.key != key {
		return "", errNoSuchUpload
	}
	if found.completed {
		return found.etag, nil // a repeated Complete
	}
	b, err := s.bucket(bucketName)
	if err != nil {
		return "", err
	}
	current := b.objects[key]
	if err := s.checkConditions(current, ifNoneMatch, ifMatch); err != nil {
		return "", err
	}
	for i := 1; i < len(parts); i++ {
		if parts[i].PartNumber <= parts[i-1].PartNumber {
			return "", s3err("InvalidPartOrder", 400, "The list of parts was not in ascending order.")
		}
	}
	size := 0
	for _, p := range parts {
		held, ok := found.parts[p.PartNumber]
		if !ok || held.etag != p.ETag {
			return "", s3err("InvalidPart", 400, "One or more of the specified parts could not be found.")
		}
		size += len(held.body)
	}
	var body []byte
	if len(parts) == 1 { // (a part's body is never written to once stored: the object can hold it)
		body = found.parts[parts[0].PartNumber].body
	} else {
		body = make([]byte, 0, size)
		for _, p := range parts {
			body = append(body, found.parts[p.PartNumber].body...)
		}
	}
	etag := multipartETag(parts)
	s.putOver(b, key, current, body, etag, "", when)
	found.completed, found.etag, found.parts = true, etag, nil
	return etag, nil
}

// Abort aborts an upload.
func (s *Store) Abort(bucketName, key, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now()
	if _, err := s.upload(bucketName, key, id); err != nil {
		return err
	}
	delete(s.uploads, id)
	return nil
}

// UploadEntry is one upload of a ListMultipartUploads.
type UploadEntry struct {
	Key, ID   string
	Initiated time.Time
}

// ListUploads is ListMultipartUploads (memory.MemoryS3.list_multipart_uploads): sorted by key, initiation, id;
// after the markers; one page.
func (s *Store) ListUploads(bucketName, prefix string, keyMarker, idMarker *string, maxUploads int) ([]UploadEntry, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now()
	if _, err := s.bucket(bucketName); err != nil {
		return nil, false, err
	}
	var found []UploadEntry
	for _, u := range s.uploads {
		if u.completed || u.bucket != bucketName || !strings.HasPrefix(u.key, prefix) {
			continue
		}
		if keyMarker != nil {
			after := ""
			if idMarker != nil {
				after = *idMarker
			}
			if !(u.key > *keyMarker || (u.key == *keyMarker && after != "" && u.id > after)) {
				continue
			}
		}
		found = append(found, UploadEntry{u.key, u.id, u.initiated})
	}
	sort.Slice(found, func(i, j int) bool {
		a, b := found[i], found[j]
		if a.Key != b.Key {
			return a.Key < b.Key
		}
		if !a.Initiated.Equal(b.Initiated) {
			return a.Initiated.Before(b.Initiated)
		}
		return a.ID < b.ID
	})
	if len(found) > maxUploads {
		return found[:maxUploads], true, nil
	}
	return found, false, nil
}

// Counts is what a benchmark checks: objects under a prefix (and those whose key contains each string), uploads.
func (s *Store) Counts(bucketName, prefix string, contains []string) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	objects, uploads := 0, 0
	containing := map[string]int{}
	for _, c := range contains {
		containing[c] = 0
	}
	if b := s.buckets[bucketName]; b != nil {
		for key := range b.objects {
			if !strings.HasPrefix(key, prefix) {
				continue
			}
			objects++
			for _, c := range contains {
				if strings.Contains(key, c) {
					containing[c]++
				}
			}
		}
	}
	for _, u := range s.uploads {
		if !u.completed && u.bucket == bucketName && strings.HasPrefix(u.key, prefix) {
			uploads++
		}
	}
	return map[string]any{"objects": objects, "containing": containing, "uploads": uploads}
}

// SeededUpload is one upload seed made: its key, id and its one part's ETag.
type SeededUpload struct {
	Key      string `json:"key"`
	UploadID string `json:"upload_id"`
	ETag     string `json:"etag"`
}

// Seed makes an upload of one part (body) at each key, at once (no latency, no throttle).
func (s *Store) Seed(bucketName string, keys []string, body []byte) ([]SeededUpload, error) {
	etag := etagOf(body)
	s.mu.Lock()
	defer s.mu.Unlock()
	when := s.now()
	if _, err := s.bucket(bucketName); err != nil {
		return nil, err
	}
	made := make([]SeededUpload, len(keys))
	for i, key := range keys {
		id := s.createUpload(bucketName, key, when)
		s.uploads[id].parts[1] = part{body, etag}
		made[i] = SeededUpload{key, id, etag}
	}
	return made, nil
}

// PutMany stores objects at once (no latency, no throttle); returns their ETags.
func (s *Store) PutMany(bucketName string, objects map[string][]byte) (map[string]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, err := s.bucket(bucketName)
	if err != nil {
		return nil, err
	}
	etags := make(map[string]string, len(objects))
	for key, body := range objects {
		etags[key] = etagOf(body)
		s.put(b, key, body, etags[key], "", s.now())
	}
	return etags, nil
}
