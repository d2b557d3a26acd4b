package main

// One HTTP request: classified, throttled, applied to the store at once, and answered as memory_wire renders the
// model's answer (or S3's <Error> document) once the request's latency has passed.

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"html"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"
)

const xmlns = "http://s3.amazonaws.com/doc/2006-03-01/"

// answer is an HTTP answer: status, headers (S3's spelling), body.
type answer struct {
	status  int
	headers fields // S3's spelling
	body    []byte
	// s3: rendered with the headers S3 adds to every answer (Date, x-amz-request-id, Server; a Content-Length
	// unless given or 204), written straight into the answer's bytes rather than added to headers.
	s3 bool
	id string // the request id, where the body names it (else a fresh one is rendered)
}

var requestIDs atomic.Uint64

func init() { requestIDs.Store(rand.Uint64() >> 8) }

// requestID is a fresh id in the shape S3 uses (16 upper-case hex characters).
func requestID() string { return string(appendRequestID(nil)) }

// appendRequestID appends a fresh request id to b.
func appendRequestID(b []byte) []byte {
	const digits = "0123456789ABCDEF"
	var id [16]byte
	n := requestIDs.Add(1)
	for i := 15; i >= 0; i-- {
		id[i] = digits[n&15]
		n >>= 4
	}
	return append(b, id[:]...)
}

func httpDate(t time.Time) string { return t.UTC().Format(http.TimeFormat) }

// cachedDate is the HTTP date of this second, formatted once a second (the Date of every answer).
type cachedDate struct {
	second int64
	text   string
}

var lastDate atomic.Pointer[cachedDate]

func nowDate() string {
	now := time.Now()
	if found := lastDate.Load(); found != nil && found.second == now.Unix() {
		return found.text
	}
	made := &cachedDate{now.Unix(), httpDate(now)}
	lastDate.Store(made)
	return made.text
}

func isoDate(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

var xmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// escaped is text escaped as xml.sax.saxutils.escape does (&, <, >).
func escaped(text string) string {
	if strings.ContainsAny(text, "&<>") {
		return xmlEscaper.Replace(text)
	}
	return text
}

// tag is <name>value</name>, the value escaped.
func tag(b *strings.Builder, name, value string) {
	b.WriteByte('<')
	b.WriteString(name)
	b.WriteByte('>')
	b.WriteString(escaped(value))
	b.WriteString("</")
	b.WriteString(name)
	b.WriteByte('>')
}

// completeDocument is CompleteMultipartUpload's answer, appended into one buffer (the answer to every Complete).
func completeDocument(url, bucket, key, etag string) []byte {
	const root = "CompleteMultipartUploadResult"
	const prolog = `<?xml version="1.0" encoding="UTF-8"?>` + "\n<" + root + ` xmlns="` + xmlns + `">`
	b := make([]byte, 0, len(prolog)+len(root)+96+len(url)+3*len(bucket)+4*len(key)+len(etag))
	b = append(append(append(b, prolog...), "<Location>"...), url...) // (a URL quoted has no character to escape)
	b = appendQuoted(append(appendQuoted(append(b, '/'), bucket), '/'), key)
	b = appendEscaped(append(b, "</Location><Bucket>"...), bucket)
	b = appendEscaped(append(b, "</Bucket><Key>"...), key)
	b = appendEscaped(append(b, "</Key><ETag>"...), etag)
	return append(b, "</ETag></"+root+">"...)
}

func xmlDocument(root string, inner string) []byte {
	const prolog = `<?xml version="1.0" encoding="UTF-8"?>` + "\n<"
	doc := make([]byte, 0, len(prolog)+2*len(root)+len(xmlns)+len(inner)+16)
	doc = append(append(append(doc, prolog...), root...), ` xmlns="`+xmlns+`">`...)
	return append(append(append(append(doc, inner...), "</"...), root...), '>')
}

// quote is Python's urllib.parse.quote(text, safe="/"): every byte but letters, digits, "_.-~/" percent-encoded.
func quote(text string) string {
	i := 0
	for i < len(text) && quoteSafe(text[i]) {
		i++
	}
	if i == len(text) {
		return text
	}
	return string(appendQuoted(make([]byte, 0, len(text)+16), text))
}

// appendQuoted appends quote(text) to b.
func appendQuoted(b []byte, text string) []byte {
	const hexDigits = "0123456789ABCDEF"
	for i := 0; i < len(text); i++ {
		if c := text[i]; quoteSafe(c) {
			b = append(b, c)
		} else {
			b = append(b, '%', hexDigits[c>>4], hexDigits[c&15])
		}
	}
	return b
}

func quoteSafe(c byte) bool {
	return ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') || c == '_' || c == '.' ||
		c == '-' || c == '~' || c == '/'
}

// appendEscaped appends text escaped to b.
func appendEscaped(b []byte, text string) []byte { return append(b, escaped(text)...) }

// errorDocument is wire.error_xml: S3's <Error> document.
func errorDocument(code, message, resource, uploadID, id string) []byte {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n<Error>")
	tag(&b, "Code", code)
	tag(&b, "Message", message)
	tag(&b, "Resource", resource)
	if uploadID != "" {
		tag(&b, "UploadId", uploadID)
	}
	tag(&b, "RequestId", id)
	b.WriteString("<HostId>s3commit-simulator</HostId></Error>")
	return []byte(b.String())
}

func errorAnswer(code string, status int, message, resource, method, uploadID string) answer {
	var body []byte
	id := requestID() // (the document's RequestId and the header's the same, as S3's are)
	if method != "HEAD" {
		body = errorDocument(code, message, unquote(resource), uploadID, id)
	}
	return answer{status: status, headers: xmlHeaders, body: body, id: id}
}

// answered is what this server answers (memory_wire's operations, and CreateBucket and ListBuckets to set up).
var answered = toSet(opHeadBucket, opPutObject, opGetObject, opHeadObject, opDeleteObject, opDeleteObjects,
	opCopyObject, opListObjectsV2, opCreateMultipartUpload, opUploadPart, opCompleteMultipartUpload,
	opAbortMultipartUpload, opListMultipartUploads, opCreateBucket, opListBuckets)

// header is a request header's value (its values joined by ","), nil when absent.
func header(r *request, name string) *string {
	value, ok := r.Header.lookup(lowerName(name))
	if !ok {
		return nil
	}
	found := value // (on the heap only when present)
	return &found
}

func first(query url.Values, name string) (string, bool) {
	values, ok := query[name]
	if !ok || len(values) == 0 {
		return "", false
	}
	return values[0], true
}

// copySource is the (bucket, key) of an x-amz-copy-source header.
func copySource(r *request) (string, string) {
	value := r.Header.get("x-amz-copy-source")
	value, _, _ = strings.Cut(value, "?")
	bucket, key, _ := strings.Cut(strings.TrimLeft(unquote(value), "/"), "/")
	return bucket, key
}

// handle answers one request: classified, throttled, applied at once; its answer, and the seconds S3 would take
// to send it (its latency: the answer is written once they have passed).
func (s *Server) handle(r *request) (answer, float64) {
	path, rawQuery, _ := strings.Cut(r.RequestURI, "?")
	if name, ok := strings.CutPrefix(path, "/_gostore/"); ok {
		query, _ := url.ParseQuery(rawQuery)
		return s.admin(name, query, r.Body), 0
	}
	query, _ := url.ParseQuery(rawQuery)
	_, copying := r.Header.lookup("x-amz-copy-source")
	operation, bucket, key := classify(r.Method, path, query, r.Host, copying)
	body := r.Body
	resource := path // unescaped where an error names it
	var delay float64
	var reply answer
	switch {
	case !answered[operation] || strings.Contains(r.Header.get("content-encoding"), "aws-chunked"):
		s.count(operation, false)
		reply = errorAnswer("NotImplemented", 501, "A header or operation you provided is not implemented.",
			resource, r.Method, "")
	case s.throttle != nil && !s.throttle.Admit(operation, bucket, key, s.cost(operation, body)):
		s.count(operation, true)
		delay = s.profile.FirstByte(operation)
		reply = errorAnswer("SlowDown", 503, "Please reduce your request rate.", resource, r.Method, "")
	default:
		s.count(operation, false)
		copied := 0
		if operation == opCopyObject {
			copied = max(0, s.store.Size(copySource(r)))
		}
		delay = s.profile.FirstByte(operation) + s.profile.Transfer(len(body)) + s.profile.Copy(copied)
		var failure error
		reply, failure = s.apply(operation, bucket, key, query, r, body)
		if failure != nil {
			e, ok := failure.(*S3Error)
			if !ok {
				e = s3err("InternalError", 500, failure.Error())
			}
			uploadID := ""
			if operation == opUploadPart || operation == opCompleteMultipartUpload || operation == opAbortMultipartUpload {
				uploadID = query.Get("uploadId")
			}
			reply = errorAnswer(e.Code, e.Status, e.Message, resource, r.Method, uploadID)
		} else if r.Method != "HEAD" {
			delay += s.profile.Transfer(len(reply.body))
		}
	}
	reply.s3 = true
	return reply, delay
}

// cost is the writes a request counts as (each key of a DeleteObjects one).
func (s *Server) cost(operation string, body []byte) int {
	if operation == opDeleteObjects {
		return max(1, bytes.Count(body, []byte("<Object>")))
	}
	return 1
}

// xmlHeaders are an XML answer's headers (shared: an answer's headers are only read once made).
var xmlHeaders = fields{{"Content-Type", "application/xml"}}

func ok(headers fields, body []byte) (answer, error) {
	return answer{status: 200, headers: headers, body: body}, nil
}

func xmlAnswer(root, inner string) (answer, error) {
	return ok(xmlHeaders, xmlDocument(root, inner))
}

func (s *Server) apply(operation, bucket, key string, query url.Values, r *request, body []byte) (answer, error) {
	switch operation {
	case opCreateBucket:
		s.store.CreateBucket(bucket)
		return ok(fields{{"Location", "/" + bucket}}, nil)
	case opListBuckets:
		var b strings.Builder
		b.WriteString("<Owner><ID>gostore</ID><DisplayName>gostore</DisplayName></Owner><Buckets>")
		for _, name := range s.store.BucketNames() {
			b.WriteString("<Bucket>")
			tag(&b, "Name", name)
			tag(&b, "CreationDate", isoDate(time.Unix(0, 0)))
			b.WriteString("</Bucket>")
		}
		b.WriteString("</Buckets>")
		return xmlAnswer("ListAllMyBucketsResult", b.String())
	case opHeadBucket:
		if err := s.store.HeadBucket(bucket); err != nil {
			return answer{}, err
		}
		return ok(fields{{"x-amz-bucket-region", "us-east-1"}}, nil)
	case opPutObject:
		contentType := ""
		if value := header(r, "Content-Type"); value != nil {
			contentType = *value
		}
		etag, err := s.store.PutObject(bucket, key, body, contentType, header(r, "If-None-Match"), header(r, "If-Match"))
		if err != nil {
			return answer{}, err
		}
		return ok(fields{{"ETag", etag}}, nil)
	case opGetObject, opHeadObject:
		return s.getObject(bucket, key, r, operation == opHeadObject)
	case opDeleteObject:
		if err := s.store.DeleteObject(bucket, key, header(r, "If-None-Match"), header(r, "If-Match")); err != nil {
			return answer{}, err
		}
		return answer{status: 204}, nil
	case opDeleteObjects:
		return s.deleteObjects(bucket, body)
	case opCopyObject:
		sourceBucket, sourceKey := copySource(r)
		etag, when, err := s.store.CopyObject(bucket, key, sourceBucket, sourceKey)
		if err != nil {
			return answer{}, err
		}
		var b strings.Builder
		tag(&b, "LastModified", isoDate(when))
		tag(&b, "ETag", etag)
		return xmlAnswer("CopyObjectResult", b.String())
	case opListObjectsV2:
		return s.listObjects(bucket, query)
	case opCreateMultipartUpload:
		id, err := s.store.CreateUpload(bucket, key)
		if err != nil {
			return answer{}, err
		}
		var b strings.Builder
		tag(&b, "Bucket", bucket)
		tag(&b, "Key", key)
		tag(&b, "UploadId", id)
		return xmlAnswer("InitiateMultipartUploadResult", b.String())
	case opUploadPart:
		number, _ := strconv.Atoi(query.Get("partNumber"))
		etag, err := s.store.UploadPart(bucket, key, query.Get("uploadId"), number, body)
		if err != nil {
			return answer{}, err
		}
		return ok(fields{{"ETag", etag}}, nil)
	case opCompleteMultipartUpload:
		parts, valid := completedParts(body)
		if !valid {
			return answer{}, errMalformedXML
		}
		etag, err := s.store.Complete(bucket, key, query.Get("uploadId"), parts,
			header(r, "If-None-Match"), header(r, "If-Match"))
		if err != nil {
			return answer{}, err
		}
		return ok(xmlHeaders, completeDocument(s.url, bucket, key, etag))
	case opAbortMultipartUpload:
		if err := s.store.Abort(bucket, key, query.Get("uploadId")); err != nil {
			return answer{}, err
		}
		return answer{status: 204}, nil
	case opListMultipartUploads:
		return s.listUploads(bucket, query)
	}
	return answer{}, s3err("NotImplemented", 501, "A header or operation you provided is not implemented.")
}

func (s *Server) getObject(bucket, key string, r *request, head bool) (answer, error) {
	found, err := s.store.Object(bucket, key, head)
	if err != nil {
		return answer{}, err
	}
	headers := fields{{"ETag", found.etag}, {"Last-Modified", httpDate(found.modified)},
		{"Content-Type", found.contentType}, {"Accept-Ranges", "bytes"}}
	body, status := found.body, 200
	if value := header(r, "Range"); !head && value != nil && *value != "" {
		start, end, valid := byteRange(*value, len(found.body))
		if !valid {
			return answer{}, s3err("InvalidRange", 416, "The requested range is not satisfiable")
		}
		body, status = found.body[start:end], 206
		headers = append(headers, field{"Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, start+len(body)-1, len(found.body))})
	}
	headers = append(headers, field{"Content-Length", strconv.Itoa(len(body))})
	if head {
		body = nil
	}
	return answer{status: status, headers: headers, body: body}, nil
}

// byteRange is a Range header's [start, end) in a body of size bytes: "bytes=first-last", "bytes=first-" or
// "bytes=-suffix".
func byteRange(value string, size int) (int, int, bool) {
	spec, found := strings.CutPrefix(strings.TrimSpace(value), "bytes=")
	firstText, lastText, dash := strings.Cut(spec, "-")
	if !found || !dash {
		return 0, 0, false
	}
	if firstText == "" {
		suffix, err := strconv.Atoi(lastText)
		if err != nil {
			return 0, 0, false
		}
		return max(0, size-suffix), size, true
	}
	start, err := strconv.Atoi(firstText)
	if err != nil || start >= size && size > 0 {
		return 0, 0, false
	}
	end := size
	if lastText != "" {
		last, err := strconv.Atoi(lastText)
		if err != nil || last < start {
			return 0, 0, false
		}
		end = min(size, last+1)
	}
	return min(start, size), end, true
}

var errMalformedXML = s3err("MalformedXML", 400,
	"The XML you provided was not well-formed or did not validate against our published schema")

// completedParts reads a CompleteMultipartUpload document's parts (<Part><PartNumber/><ETag/></Part>, in order),
// by scanning: the one document of every Complete, which encoding/xml parses at several times the cost.
func completedParts(body []byte) ([]CompletedPart, bool) {
	text := unsafe.String(unsafe.SliceData(body), len(body)) // (no copy: the parts' ETags are not kept past the request)
	if strings.TrimSpace(text) == "" {
		return nil, true
	}
	if !strings.Contains(text, "CompleteMultipartUpload") {
		return nil, false
	}
	var parts []CompletedPart
	for {
		start := strings.Index(text, "<Part>")
		if start < 0 {
			return parts, true
		}
		end := strings.Index(text[start:], "</Part>")
		if end < 0 {
			return nil, false
		}
		inner := text[start+len("<Part>") : start+end]
		text = text[start+end+len("</Part>"):]
		number := 0
		if value, found := element(inner, "PartNumber"); found {
			n, err := strconv.Atoi(strings.TrimSpace(value))
			if err != nil {
				return nil, false
			}
			number = n
		}
		etag, _ := element(inner, "ETag")
		parts = append(parts, CompletedPart{PartNumber: number, ETag: etag})
	}
}

// element is the unescaped text of <name>...</name> in inner.
func element(inner, name string) (string, bool) {
	_, after, found := strings.Cut(inner, "<"+name+">")
	if !found {
		return "", false
	}
	value, _, found := strings.Cut(after, "</"+name+">")
	if !found {
		return "", false
	}
	if strings.ContainsRune(value, '&') {
		value = html.UnescapeString(value)
	}
	return value, true
}

// deleteDocument is a DeleteObjects request's document.
type deleteDocument struct {
	Objects []DeleteEntry `xml:"Object"`
	Quiet   string        `xml:"Quiet"`
}

// deleteEntries reads a DeleteObjects document (<Object><Key/><ETag/>?</Object>..., <Quiet/>) by scanning where it is
// written so (as SDKs write it: no comment, CDATA or attribute inside an entry), else by encoding/xml: a document of
// 1,000 keys costs encoding/xml ~2.3 ms of the store's one core, 32 of them in flight 75 ms more on each answer.
func deleteEntries(body []byte) (deleteDocument, bool) {
	text := string(body)
	if !strings.Contains(text, "<!") && strings.Count(text, "<Object>") == strings.Count(text, "<Object") {
		if document, ok := scannedDeletes(text); ok {
			return document, true
		}
	}
	var document deleteDocument
	if err := xml.Unmarshal(body, &document); err != nil {
		return document, false
	}
	return document, true
}

func scannedDeletes(text string) (deleteDocument, bool) {
	var document deleteDocument
	if !strings.Contains(text, "<Delete") {
		return document, false
	}
	document.Objects = make([]DeleteEntry, 0, strings.Count(text, "<Object>"))
	rest := text
	for {
		start := strings.Index(rest, "<Object>")
		if start < 0 {
			break
		}
		end := strings.Index(rest[start:], "</Object>")
		if end < 0 {
			return document, false
		}
		inner := rest[start+len("<Object>") : start+end]
		rest = rest[start+end+len("</Object>"):]
		key, found := element(inner, "Key")
		if !found || strings.Count(inner, "<") != strings.Count(inner, ">") {
			return document, false
		}
		entry := DeleteEntry{Key: key}
		if etag, found := element(inner, "ETag"); found {
			entry.ETag = &etag
		}
		document.Objects = append(document.Objects, entry)
	}
	document.Quiet, _ = element(text, "Quiet")
	return document, true
}

func (s *Server) deleteObjects(bucket string, body []byte) (answer, error) {
	document, ok := deleteEntries(body)
	if !ok {
		return answer{}, errMalformedXML
	}
	refused, err := s.store.DeleteObjects(bucket, document.Objects)
	if err != nil {
		return answer{}, err
	}
	failed := make(map[string]bool, len(refused))
	for _, e := range refused {
		failed[e.Key] = true
	}
	var b strings.Builder
	if strings.ToLower(strings.TrimSpace(document.Quiet)) != "true" {
		for _, entry := range document.Objects {
			if !failed[entry.Key] {
				b.WriteString("<Deleted>")
				tag(&b, "Key", entry.Key)
				b.WriteString("</Deleted>")
			}
		}
	}
	for _, e := range refused {
		b.WriteString("<Error>")
		tag(&b, "Key", e.Key)
		tag(&b, "Code", e.Code)
		tag(&b, "Message", e.Message)
		b.WriteString("</Error>")
	}
	return xmlAnswer("DeleteResult", b.String())
}

func (s *Server) listObjects(bucket string, query url.Values) (answer, error) {
	prefix, _ := first(query, "prefix")
	delimiter, _ := first(query, "delimiter")
	token, _ := first(query, "continuation-token")
	startAfter, _ := first(query, "start-after")
	maxKeys := page
	if text, _ := first(query, "max-keys"); text != "" {
		n, err := strconv.Atoi(text)
		if err != nil || n < 0 {
			return answer{}, s3err("InvalidArgument", 400, "Provided max-keys not an integer or within integer range")
		}
		maxKeys = n
	}
	result, err := s.store.ListObjects(bucket, prefix, delimiter, token, startAfter, maxKeys)
	if err != nil {
		return answer{}, err
	}
	// botocore asks for url-encoded keys (encoding-type=url) and decodes them; the token is a key, opaque here
	var b strings.Builder
	tag(&b, "Name", bucket)
	tag(&b, "Prefix", quote(prefix))
	tag(&b, "KeyCount", strconv.Itoa(len(result.Entries)))
	tag(&b, "MaxKeys", strconv.Itoa(maxKeys))
	tag(&b, "IsTruncated", strconv.FormatBool(result.Truncated))
	tag(&b, "EncodingType", "url")
	if delimiter != "" {
		tag(&b, "Delimiter", quote(delimiter))
	}
	if token != "" {
		tag(&b, "ContinuationToken", token)
	}
	if startAfter != "" {
		tag(&b, "StartAfter", quote(startAfter))
	}
	if result.Truncated {
		tag(&b, "NextContinuationToken", result.NextToken)
	}
	for _, entry := range result.Entries {
		if entry.obj == nil {
			continue
		}
		b.WriteString("<Contents>")
		tag(&b, "Key", quote(entry.Key))
		tag(&b, "LastModified", isoDate(entry.obj.modified))
		tag(&b, "ETag", entry.obj.etag)
		tag(&b, "Size", strconv.Itoa(len(entry.obj.body)))
		b.WriteString("<StorageClass>STANDARD</StorageClass></Contents>")
	}
	for _, entry := range result.Entries {
		if entry.obj == nil {
			b.WriteString("<CommonPrefixes>")
			tag(&b, "Prefix", quote(entry.Key))
			b.WriteString("</CommonPrefixes>")
		}
	}
	return xmlAnswer("ListBucketResult", b.String())
}

func (s *Server) listUploads(bucket string, query url.Values) (answer, error) {
	prefix, _ := first(query, "prefix")
	var keyMarker, idMarker *string
	if value, present := first(query, "key-marker"); present {
		keyMarker = &value
		idValue, _ := first(query, "upload-id-marker")
		idMarker = &idValue
	}
	maxUploads := page
	if text, _ := first(query, "max-uploads"); text != "" {
		n, err := strconv.Atoi(text)
		if err != nil || n < 0 {
			return answer{}, s3err("InvalidArgument", 400, "Provided max-uploads not an integer or within integer range")
		}
		maxUploads = n
	}
	encoding, _ := first(query, "encoding-type")
	encoded := encoding == "url"
	name := func(text string) string {
		if encoded {
			return quote(text)
		}
		return text
	}
	uploads, truncated, err := s.store.ListUploads(bucket, prefix, keyMarker, idMarker, maxUploads)
	if err != nil {
		return answer{}, err
	}
	var b strings.Builder
	tag(&b, "Bucket", bucket)
	marker, markerID := "", ""
	if keyMarker != nil {
		marker, markerID = *keyMarker, *idMarker
	}
	tag(&b, "KeyMarker", name(marker))
	tag(&b, "UploadIdMarker", markerID)
	tag(&b, "Prefix", name(prefix))
	tag(&b, "MaxUploads", strconv.Itoa(maxUploads))
	tag(&b, "IsTruncated", strconv.FormatBool(truncated))
	if encoded {
		tag(&b, "EncodingType", "url")
	}
	if truncated && len(uploads) > 0 {
		last := uploads[len(uploads)-1]
		tag(&b, "NextKeyMarker", name(last.Key))
		tag(&b, "NextUploadIdMarker", last.ID)
	}
	for _, u := range uploads {
		b.WriteString("<Upload>")
		tag(&b, "Key", name(u.Key))
		tag(&b, "UploadId", u.ID)
		tag(&b, "Initiated", isoDate(u.Initiated))
		b.WriteString("<StorageClass>STANDARD</StorageClass></Upload>")
	}
	return xmlAnswer("ListMultipartUploadsResult", b.String())
}
