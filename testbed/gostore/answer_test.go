package main

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// BenchmarkCompleteAnswer is one CompleteMultipartUpload shaped as s3commit's lean path sends it: parsed, applied
// and rendered (no system call): the store's own CPU per answer, and its allocations.
func BenchmarkCompleteAnswer(b *testing.B) {
	s := newServer(Config{}, "http://127.0.0.1:1")
	s.store.CreateBucket("scale")
	keys := make([]string, b.N)
	for i := range keys {
		keys[i] = fmt.Sprintf("table/day=%d/part-%06d-5e03487e-5900-4101-af48-877dc937f95d-c000.parquet", i%100, i)
	}
	seeded, err := s.store.Seed("scale", keys, []byte("new"))
	if err != nil {
		b.Fatal(err)
	}
	raw := make([][]byte, b.N)
	for i, u := range seeded {
		body := `<CompleteMultipartUpload xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Part><PartNumber>1</PartNumber><ETag>` +
			u.ETag + `</ETag></Part></CompleteMultipartUpload>`
		raw[i] = []byte(fmt.Sprintf("POST /scale/%s?uploadId=%s HTTP/1.1\r\nHost: 127.0.0.1:1\r\nUser-Agent: s3commit/0.1.0 lean\r\n"+
			"X-Amz-Date: 20261201T040202Z\r\nX-Amz-Content-SHA256: a6d597787da3a9dbee0f2fd3ef1855d9ba62f5320e2412c6df941759294257ac\r\n"+
			"Authorization: AWS4-HMAC-SHA256 Credential=testing/20261201/us-east-1/s3/aws4_request, SignedHeaders=host;"+
			"x-amz-content-sha256;x-amz-date, Signature=d6762fb4f41b5e161810d6c844eae0bbbbba7a274379664e8a14ec8e1fbee907\r\n"+
			"Content-Length: %d\r\n\r\n%s", url.PathEscape(u.Key), u.UploadID, len(body), body))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req, _, err := parseRequest(raw[i])
		if err != nil || req == nil {
			b.Fatalf("not parsed: %v", err)
		}
		reply, _ := s.handle(req)
		if reply.status != 200 {
			b.Fatalf("answered %d: %s", reply.status, reply.body)
		}
		_ = renderAnswer(req, reply)
	}
}

// An error's document names the request id its x-amz-request-id header gives, as S3's do.
func TestErrorAnswerNamesItsRequestID(t *testing.T) {
	s := newServer(Config{}, "http://127.0.0.1:1")
	s.store.CreateBucket("b")
	req, _, err := parseRequest([]byte("GET /b/missing HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n"))
	if err != nil || req == nil {
		t.Fatalf("not parsed: %v", err)
	}
	reply, _ := s.handle(req)
	text := string(renderAnswer(req, reply))
	_, after, found := strings.Cut(text, "\r\nx-amz-request-id: ")
	id, _, _ := strings.Cut(after, "\r\n")
	if reply.status != 404 || !found || len(id) != 16 || !strings.Contains(text, "<RequestId>"+id+"</RequestId>") {
		t.Fatalf("the header's request id (%q) is not the document's:\n%s", id, text)
	}
}

// A Complete's answer: its Location quoted (safe "/"), its Bucket, Key and ETag escaped.
func TestCompleteDocument(t *testing.T) {
	got := string(completeDocument("http://127.0.0.1:1", "b", "a&b/c d=1", `"e"`))
	want := `<?xml version="1.0" encoding="UTF-8"?>` + "\n" + `<CompleteMultipartUploadResult xmlns="` + xmlns + `">` +
		`<Location>http://127.0.0.1:1/b/a%26b/c%20d%3D1</Location><Bucket>b</Bucket><Key>a&amp;b/c d=1</Key>` +
		`<ETag>"e"</ETag></CompleteMultipartUploadResult>`
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}
