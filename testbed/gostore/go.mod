module s3commit/gostore

go 1.22
