"""The committer contract suite runs on both test servers: moto behind the simulator (the default tier) and
SeaweedFS, a real S3 implementation (the slow tier, marked ``seaweedfs``)."""

from testbed.fixtures import every_server_fixture

s3_server = every_server_fixture()
