"""MemoryS3's listings read only the keys under their prefix (a lazily kept key index) and page as S3 pages:
keys added, replaced and deleted between pages, common prefixes across a page's end."""

from __future__ import annotations

from s3commit.testing.memory import MemoryS3


def listed(client, bucket: str, prefix: str, *, delimiter: str | None = None, page: int = 2) -> list[str]:
    names, token = [], None
    while True:
        args = {"Bucket": bucket, "Prefix": prefix, "MaxKeys": page,
                **({"Delimiter": delimiter} if delimiter else {}), **({"ContinuationToken": token} if token else {})}
        answer = client.list_objects_v2(**args)
        names += [o["Key"] for o in answer["Contents"]] + [c["Prefix"] for c in answer["CommonPrefixes"]]
        if not answer["IsTruncated"]:
            return names
        token = answer["NextContinuationToken"]


def test_a_listing_sees_keys_added_replaced_and_deleted_since_the_last_one():
    s3 = MemoryS3()
    client = s3.store(buckets=()).requests.client
    client.create_bucket(Bucket="b")
    for key in ("t/c", "t/a", "u/x", "t/b", "s/y"):
        client.put_object(Bucket="b", Key=key, Body=b"1")
    assert listed(client, "b", "t/") == ["t/a", "t/b", "t/c"]
    client.put_object(Bucket="b", Key="t/b", Body=b"2")  # replaced: listed once
    client.put_object(Bucket="b", Key="t/aa", Body=b"1")
    client.delete_object(Bucket="b", Key="t/a")
    client.delete_objects(Bucket="b", Delete={"Objects": [{"Key": "t/c"}]})
    assert listed(client, "b", "t/") == ["t/aa", "t/b"]
    assert listed(client, "b", "") == ["s/y", "t/aa", "t/b", "u/x"]


def test_common_prefixes_page_across_their_keys():
    s3 = MemoryS3()
    client = s3.store(buckets=()).requests.client
    client.create_bucket(Bucket="b")
    for key in ("d/a/1", "d/a/2", "d/a/3", "d/b", "d/c/1", "d/c/2", "d/e"):
        client.put_object(Bucket="b", Key=key, Body=b"1")
    by_one = listed(client, "b", "d/", delimiter="/", page=1)
    assert by_one == sorted(listed(client, "b", "d/", delimiter="/", page=1000))  # in order, one per page
    assert sorted(by_one) == ["d/a/", "d/b", "d/c/", "d/e"]
