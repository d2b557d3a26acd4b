package main

// Which S3 operation an HTTP request performs, with the names and rules of s3commit.testing._sim.classify
// (method + sub-resource query parameters + x-amz-copy-source; path-style, and virtual-hosted style by Host).

import (
	"net"
	"net/url"
	"regexp"
	"strings"
	"sync"
)

const (
	opCreateMultipartUpload   = "CreateMultipartUpload"
	opUploadPart              = "UploadPart"
	opUploadPartCopy          = "UploadPartCopy"
	opCompleteMultipartUpload = "CompleteMultipartUpload"
	opAbortMultipartUpload    = "AbortMultipartUpload"
	opListMultipartUploads    = "ListMultipartUploads"
	opListParts               = "ListParts"
	opPutObject               = "PutObject"
	opCopyObject              = "CopyObject"
	opGetObject               = "GetObject"
	opHeadObject              = "HeadObject"
	opDeleteObject            = "DeleteObject"
	opDeleteObjects           = "DeleteObjects"
	opListObjectsV2           = "ListObjectsV2"
	opListObjects             = "ListObjects"
	opListBuckets             = "ListBuckets"
	opHeadBucket              = "HeadBucket"
	opCreateBucket            = "CreateBucket"
	opDeleteBucket            = "DeleteBucket"
	opOther                   = "other"
)

// writeOperations is classify.WRITE_OPERATIONS: counted against the writes budget of a partition.
var writeOperations = map[string]bool{
	opCreateMultipartUpload: true, opUploadPart: true, opUploadPartCopy: true, opCompleteMultipartUpload: true,
	opAbortMultipartUpload: true, opPutObject: true, opCopyObject: true, opDeleteObject: true,
	opDeleteObjects: true, opCreateBucket: true, opDeleteBucket: true,
}

var plainParameters = toSet("prefix", "delimiter", "marker", "max-keys", "encoding-type", "continuation-token",
	"fetch-owner", "start-after", "versionId", "partNumber", "x-id",
	"response-content-type", "response-content-language", "response-expires",
	"response-cache-control", "response-content-disposition", "response-content-encoding",
	"X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires", "X-Amz-SignedHeaders",
	"X-Amz-Signature", "X-Amz-Security-Token")

var listUploadsParameters = toSet("uploads", "key-marker", "upload-id-marker", "max-uploads")

var virtualHost = regexp.MustCompile(`^(.+?)\.(?:s3(?:[.-].*)?|localhost)$`)

func toSet(names ...string) map[string]bool {
	set := make(map[string]bool, len(names))
	for _, name := range names {
		set[name] = true
	}
	return set
}

// splitBucketAndKey is classify.split_bucket_and_key: (bucket, unescaped key) of an escaped path.
func splitBucketAndKey(path, host string) (string, string) {
	stripped := strings.TrimLeft(path, "/")
	if bucket, ok := virtualHostBucket(host); ok {
		return bucket, unquote(stripped)
	}
	bucket, key, _ := strings.Cut(stripped, "/")
	return unquote(bucket), unquote(key)
}

// hostBuckets caches virtualHostBucket's answers: a store is reached by a handful of Host headers.
var hostBuckets sync.Map

type hostBucket struct {
	bucket string
	found  bool
}

func virtualHostBucket(host string) (string, bool) {
	if host == "" {
		return "", false
	}
	if cached, ok := hostBuckets.Load(host); ok {
		found := cached.(hostBucket)
		return found.bucket, found.found
	}
	bucket, found := parseVirtualHost(host)
	hostBuckets.Store(host, hostBucket{bucket, found})
	return bucket, found
}

func parseVirtualHost(host string) (string, bool) {
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.Trim(name, "[]")
	if net.ParseIP(name) != nil {
		return "", false
	}
	match := virtualHost.FindStringSubmatch(strings.ToLower(name))
	if match == nil {
		return "", false
	}
	return match[1], true
}

func unquote(text string) string {
	if !strings.ContainsRune(text, '%') {
		return text
	}
	found, err := url.PathUnescape(text)
	if err != nil {
		return text
	}
	return found
}

// classify is classify.classify_request: the operation, bucket and key of one request.
func classify(method, path string, query url.Values, host string, copySource bool) (string, string, string) {
	bucket, key := splitBucketAndKey(path, host)
	method = strings.ToUpper(method)
	subresources := map[string]bool{}
	for name := range query {
		if !plainParameters[name] {
			subresources[name] = true
		}
	}
	switch {
	case bucket == "":
		if method == "GET" && len(subresources) == 0 {
			return opListBuckets, bucket, key
		}
		return opOther, bucket, key
	case key == "":
		return bucketOperation(method, subresources), bucket, key
	}
	return objectOperation(method, query, subresources, copySource), bucket, key
}

func subsetOf(set, of map[string]bool) bool {
	for name := range set {
		if !of[name] {
			return false
		}
	}
	return true
}

func bucketOperation(method string, subresources map[string]bool) string {
	if method == "GET" {
		if subresources["uploads"] && subsetOf(subresources, listUploadsParameters) {
			return opListMultipartUploads
		}
		if len(subresources) == 1 && subresources["list-type"] {
			return opListObjectsV2
		}
		if len(subresources) == 0 {
			return opListObjects
		}
		return opOther
	}
	if len(subresources) > 0 {
		if method == "POST" && len(subresources) == 1 && subresources["delete"] {
			return opDeleteObjects
		}
		return opOther
	}
	switch method {
	case "HEAD":
		return opHeadBucket
	case "PUT":
		return opCreateBucket
	case "DELETE":
		return opDeleteBucket
	}
	return opOther
}

func objectOperation(method string, query url.Values, subresources map[string]bool, copySource bool) string {
	upload := subresources["uploadId"]
	if upload && len(subresources) != 1 {
		if method == "GET" && subsetOf(subresources, toSet("uploadId", "part-number-marker", "max-parts")) {
			return opListParts
		}
		return opOther
	}
	if upload {
		if _, ok := query["partNumber"]; ok && method == "PUT" {
			if copySource {
				return opUploadPartCopy
			}
			return opUploadPart
		}
		switch method {
		case "POST":
			return opCompleteMultipartUpload
		case "DELETE":
			return opAbortMultipartUpload
		case "GET":
			return opListParts
		}
		return opOther
	}
	if len(subresources) == 1 && subresources["uploads"] {
		if method == "POST" {
			return opCreateMultipartUpload
		}
		return opOther
	}
	if len(subresources) > 0 {
		return opOther
	}
	switch method {
	case "PUT":
		if copySource {
			return opCopyObject
		}
		return opPutObject
	case "GET":
		return opGetObject
	case "HEAD":
		return opHeadObject
	case "DELETE":
		return opDeleteObject
	}
	return opOther
}
