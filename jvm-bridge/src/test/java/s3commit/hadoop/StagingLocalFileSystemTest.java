package s3commit.hadoop;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.junit.jupiter.api.Test;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.Arrays;

/** A staging task's local output: raw files, no checksum files, found by its scheme once registered. */
final class StagingLocalFileSystemTest {
  @Test
  void testTaskFilesAreWrittenRawWithNoChecksumFiles() throws Exception {
    File dir = Files.createTempDirectory("s3commit-staging-test").toFile();
    try {
      Configuration conf = new Configuration(false);
      StagingLocalFileSystem.register(conf);
      String work = StagingLocalFileSystem.pathFor("file://" + dir.getAbsolutePath());
      assertTrue(work.startsWith("s3commit-staging:///"), "the work path names the scheme: " + work);
      Path file = new Path(work + "/year=2026/part-00000.txt");
      FileSystem fs = file.getFileSystem(conf);
      assertEquals(StagingLocalFileSystem.class, fs.getClass(), "the file system of the scheme");
      try (FSDataOutputStream out = fs.create(file, false)) {
        out.write("hello\n".getBytes(StandardCharsets.UTF_8));
      }
      File written = new File(dir, "year=2026/part-00000.txt");
      assertEquals("hello\n", new String(Files.readAllBytes(written.toPath()), StandardCharsets.UTF_8), "the bytes");
      String[] names = new File(dir, "year=2026").list();
      Arrays.sort(names);
      assertEquals("[part-00000.txt]", Arrays.toString(names), "no .crc file beside it");
      assertEquals(6L, fs.getFileStatus(file).getLen(), "its length, as Spark's write statistics ask");
      assertEquals("s3commit-staging:///tmp", StagingLocalFileSystem.pathFor("/tmp"), "an absolute path");
      assertEquals("s3a://b/k", StagingLocalFileSystem.pathFor("s3a://b/k"), "a URI is left alone");
    } finally {
      try (java.util.stream.Stream<java.nio.file.Path> walk = Files.walk(dir.toPath())) {
        walk.sorted(java.util.Comparator.reverseOrder()).map(java.nio.file.Path::toFile).forEach(File::delete);
      }
    }
  }
}
