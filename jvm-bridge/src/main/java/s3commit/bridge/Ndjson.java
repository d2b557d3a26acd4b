package s3commit.bridge;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * The bridge's newline-delimited JSON bodies (task messages to a job commit, listings and committed files
 * back): one record per line, UTF-8, empty lines skipped. Neither side holds a whole body in one frame.
 */
public final class Ndjson {
  private Ndjson() {
  }

  /** A request body of {@code records} (each already JSON, without a newline), one per line. */
  public static Sidecar.RequestBody body(Iterable<String> records) {
    return Sidecar.streamed(out -> write(out, records));
  }

  static void write(OutputStream out, Iterable<String> records) throws IOException {
    for (String record : records) {
      out.write(record.getBytes(StandardCharsets.UTF_8));
      out.write('\n');
    }
  }

  /** Turns one parsed record into a value. */
  public interface RecordReader<T> {
    T read(Map<String, Object> record) throws IOException;
  }

  /** Every record of {@code body} (none when there is no body), each turned into a value by {@code reader}. */
  @SuppressWarnings("unchecked")
  public static <T> List<T> read(InputStream body, RecordReader<T> reader) throws IOException {
    List<T> values = new ArrayList<>();
    if (body == null) {
      return values;
    }
    BufferedReader lines = new BufferedReader(new InputStreamReader(body, StandardCharsets.UTF_8));
    String line;
    while ((line = lines.readLine()) != null) {
      if (!line.isEmpty()) {
        Map<String, Object> record = FrameChannel.JSON.readValue(line, Map.class);
        values.add(reader.read(record));
      }
    }
    return values;
  }
}
