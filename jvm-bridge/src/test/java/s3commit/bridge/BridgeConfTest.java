package s3commit.bridge;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import org.apache.hadoop.conf.Configuration;
import org.junit.jupiter.api.Test;

import java.util.Map;

/** Which Hadoop keys reach the sidecar, and per-bucket overrides (S3A's rule). */
final class BridgeConfTest {
  @Test
  void testOnlyS3aAndS3commitKeysAreForwardedWithPerBucketOverrides() {
    Configuration conf = new Configuration(false);
    conf.set("fs.s3a.endpoint", "http://general");
    conf.set("fs.s3a.bucket.special.endpoint", "http://special");
    conf.set("fs.s3a.bucket.other.endpoint", "http://other");
    conf.set("s3commit.commit.journal", "false");
    conf.set("mapreduce.fileoutputcommitter.marksuccessfuljobs", "false");
    conf.set("spark.app.name", "not forwarded");
    conf.set("fs.s3a.multipart.size", "${fs.s3a.base.size}");
    conf.set("fs.s3a.base.size", "32M");
    Map<String, String> special = BridgeConf.relevant(conf, "special");
    assertEquals("http://special", special.get("fs.s3a.endpoint"), "per-bucket endpoint wins");
    assertNull(special.get("fs.s3a.bucket.other.endpoint"), "other buckets' keys are dropped");
    assertEquals("false", special.get("s3commit.commit.journal"), "s3commit keys");
    assertEquals("false", special.get("mapreduce.fileoutputcommitter.marksuccessfuljobs"), "success marker key");
    assertNull(special.get("spark.app.name"), "nothing else");
    assertEquals("32M", special.get("fs.s3a.multipart.size"), "variables resolved");
    assertEquals("http://general", BridgeConf.relevant(conf, "plain").get("fs.s3a.endpoint"), "no override");
  }

  @Test
  void testKeysOnlyHadoopsDefaultsSetAreNotForwarded() {
    Configuration conf = new Configuration();  // with core-default.xml: S3A's defaults (committer "file"...)
    assertEquals("file", conf.get("fs.s3a.committer.name"), "core-default.xml is loaded");
    Map<String, String> keys = BridgeConf.relevant(conf, "b");
    assertNull(keys.get("fs.s3a.committer.name"), "a default is not a setting: s3commit's default applies");
    assertNull(keys.get("fs.s3a.aws.credentials.provider"), "S3A's default chain is not the user's");
    conf.set("fs.s3a.committer.threads", "8");
    conf.set("fs.s3a.connection.maximum", "500", "core-site.xml");
    keys = BridgeConf.relevant(conf, "b");
    assertEquals("8", keys.get("fs.s3a.committer.threads"), "a value set in code (Spark's spark.hadoop.*)");
    assertEquals("500", keys.get("fs.s3a.connection.maximum"), "a value of the cluster's core-site.xml");
  }
}
