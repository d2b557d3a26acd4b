package s3commit.bridge;

import org.apache.hadoop.fs.FileAlreadyExistsException;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.nio.file.AccessDeniedException;
import java.util.Map;

/**
 * The Java exceptions for the sidecar's error families (the Python side's table is
 * {@code s3commit.bridge.reply.java_families}). Each carries what the sidecar knew ({@link Details}: the Python
 * error class, S3's error code, the bucket, key and upload id) and keeps the Hadoop or JDK type callers rely on
 * where there is one.
 */
public final class SidecarErrors {
  private SidecarErrors() {
  }

  /** What the sidecar said about an error, beyond its message; any part may be null. */
  public interface Details {
    Info details();

    default String errorClass() {
      return details().errorClass;
    }

    default String code() {
      return details().code;
    }

    default String bucket() {
      return details().bucket;
    }

    default String key() {
      return details().key;
    }

    default String uploadId() {
      return details().uploadId;
    }
  }

  /** The fields of an error header. */
  public static final class Info implements java.io.Serializable {
    private static final long serialVersionUID = 1L;
    final String errorClass;
    final String code;
    final String bucket;
    final String key;
    final String uploadId;

    Info(Map<String, Object> error) {
      this.errorClass = text(error.get("error_class"));
      this.code = text(error.get("code"));
      this.bucket = text(error.get("bucket"));
      this.key = text(error.get("key"));
      this.uploadId = text(error.get("upload_id"));
    }

    private static String text(Object value) {
      return value == null ? null : String.valueOf(value);
    }
  }

  /** {@code FileNotFound}: no such key, upload or bucket. */
  public static final class S3FileNotFoundException extends FileNotFoundException implements Details {
    private static final long serialVersionUID = 1L;
    private final Info info;

    S3FileNotFoundException(String message, Info info) {
      super(message);
      this.info = info;
    }

    @Override
    public Info details() {
      return info;
    }
  }

  /** {@code FileAlreadyExists}: a conflict with existing output, or a condition (If-None-Match) that failed. */
  public static final class S3FileAlreadyExistsException extends FileAlreadyExistsException implements Details {
    private static final long serialVersionUID = 1L;
    private final Info info;

    S3FileAlreadyExistsException(String message, Info info) {
      super(message);
      this.info = info;
    }

    @Override
    public Info details() {
      return info;
    }
  }

  /** {@code AccessDenied}: S3 answered 403 (as S3A raises it, a {@code java.nio.file.AccessDeniedException}). */
  public static final class S3AccessDeniedException extends AccessDeniedException implements Details {
    private static final long serialVersionUID = 1L;
    private final Info info;

    S3AccessDeniedException(String message, Info info) {
      super(info.key == null ? String.valueOf(info.bucket) : info.bucket + "/" + info.key, null, message);
      this.info = info;
    }

    @Override
    public Info details() {
      return info;
    }
  }

  /** Every other family ({@code Unreachable}, {@code Transient}, {@code IllegalArgument}, {@code IllegalState},
   * {@code IO}): an {@code IOException} naming its family; {@code IllegalArgument} has an
   * {@code IllegalArgumentException} as its cause. */
  public static final class SidecarIOException extends IOException implements Details {
    private static final long serialVersionUID = 1L;
    private final String family;
    private final Info info;

    SidecarIOException(String family, String message, Info info) {
      super(message, "IllegalArgument".equals(family) ? new IllegalArgumentException(message) : null);
      this.family = family;
      this.info = info;
    }

    /** The sidecar's family name: {@code Unreachable}, {@code Transient}, {@code IllegalArgument}... */
    public String family() {
      return family;
    }

    @Override
    public Info details() {
      return info;
    }
  }

  /** The exception for an error header's {@code error} object. */
  static IOException of(Map<String, Object> error) {
    String type = String.valueOf(error.get("type"));
    String message = String.valueOf(error.get("message"));
    Info info = new Info(error);
    switch (type) {
      case "FileNotFound":
        return new S3FileNotFoundException(message, info);
      case "FileAlreadyExists":
        return new S3FileAlreadyExistsException(message, info);
      case "AccessDenied":
        return new S3AccessDeniedException(message, info);
      case "UnknownConfiguration":
        return new Sidecar.UnknownConfigurationException(message);
      case "FrameTooLarge":
        return new FrameChannel.FrameTooLargeException(message);
      default:
        return new SidecarIOException(type, message, info);
    }
  }
}
