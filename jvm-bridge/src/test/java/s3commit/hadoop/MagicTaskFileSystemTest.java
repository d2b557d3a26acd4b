package s3commit.hadoop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.junit.jupiter.api.Test;

import java.net.URI;

/**
 * Magic task files where another FileSystem serves {@code s3a://}: under s3commit's own scheme, registered in the
 * task's configuration; where s3commit's serves it, {@code s3a://} as before; the sidecar always reads {@code s3a://}.
 */
final class MagicTaskFileSystemTest {
  private static final String WORK = "s3a://b/t/__magic_job-1/job-1/00/tasks/attempt_1/__base";

  private static Configuration serving(Class<?> s3a) {
    Configuration conf = new Configuration(false);
    if (s3a != null) {
      conf.set("fs.s3a.impl", s3a.getName());
    }
    return conf;
  }

  @Test
  void testWhereS3commitServesS3aTheWorkPathStaysS3a() {
    Configuration conf = serving(S3FileSystem.class);
    assertEquals(WORK, MagicTaskFileSystem.pathFor(WORK, conf));
    assertNull(conf.get(MagicTaskFileSystem.IMPL_KEY), "nothing registered");
    assertTrue(MagicTaskFileSystem.describe(conf).startsWith("s3a:// is served by s3commit's FileSystem"));
  }

  @Test
  void testWhereAnotherServesS3aTheWorkPathTakesS3commitsScheme() throws Exception {
    Configuration conf = serving(RawLocalFileSystem.class);  // standing in for hadoop-aws's S3AFileSystem
    String work = MagicTaskFileSystem.pathFor(WORK, conf);
    assertEquals("s3commit-magic://b/t/__magic_job-1/job-1/00/tasks/attempt_1/__base", work);
    assertEquals(MagicTaskFileSystem.class.getName(), conf.get(MagicTaskFileSystem.IMPL_KEY), "registered");
    assertEquals(MagicTaskFileSystem.class, org.apache.hadoop.fs.FileSystem.getFileSystemClass("s3commit-magic", conf));
    assertEquals("s3a:// is served by org.apache.hadoop.fs.RawLocalFileSystem; s3commit's magic task files go "
        + "through its own s3commit-magic:// FileSystem", MagicTaskFileSystem.describe(conf));
    assertEquals("s3a://b/t/x", MagicTaskFileSystem.sidecarLocation("s3commit-magic://b/t/x"), "the sidecar's form");
    assertEquals("s3a://b/t/x", MagicTaskFileSystem.sidecarLocation("s3a://b/t/x"));
  }

  @Test
  void testWhereNothingServesS3aTheWorkPathTakesS3commitsScheme() {
    Configuration conf = serving(null);
    assertTrue(MagicTaskFileSystem.pathFor(WORK, conf).startsWith("s3commit-magic://b/"));
    assertTrue(MagicTaskFileSystem.describe(conf).startsWith("s3a:// is served by no FileSystem"));
  }

  @Test
  void testLocalWorkPathsAreLeftAlone() {
    Configuration conf = serving(RawLocalFileSystem.class);
    assertEquals("s3commit-staging:///tmp/x", MagicTaskFileSystem.pathFor("s3commit-staging:///tmp/x", conf));
    assertEquals("file:///tmp/x", MagicTaskFileSystem.pathFor("file:///tmp/x", conf));
  }

  /** A magic-scheme FileSystem for bucket {@code b} that needs no sidecar (only its naming is under test). */
  static final class Named extends MagicTaskFileSystem {
    @Override
    public URI getUri() {
      return URI.create("s3commit-magic://b");
    }

    @Override
    public Path getWorkingDirectory() {
      return new Path("s3commit-magic://b/");
    }
  }

  @Test
  void testItsPathsReachTheSidecarAsS3a() {
    assertEquals("s3a://b/t/__magic_job-1/f", new Named().location(new Path("s3commit-magic://b/t/__magic_job-1/f")));
    assertEquals("s3commit-magic", new Named().getScheme());
  }
}
