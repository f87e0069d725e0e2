package io.sparkdlq.engine.pulsar;

import java.io.InterruptedIOException;
import java.io.UncheckedIOException;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;

/** A Pulsar read or write failed; the message names the topic and what failed. */
public final class PulsarConnectorException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  PulsarConnectorException(String message, Throwable cause) {
    super(message, cause);
  }

  PulsarConnectorException(String message) {
    super(message);
  }

  /**
   * The error to throw for {@code error} while doing what {@code message} says: a {@link
   * PulsarConnectorException}, or, when the thread was interrupted (a query being stopped), an
   * interruption as Spark recognises one (an {@link UncheckedIOException} of an {@link
   * InterruptedIOException}), so that a stop is a stop and not a failed query.
   */
  static RuntimeException of(String message, Throwable error) {
    for (Throwable cause = error; cause != null; cause = cause.getCause()) {
      if (cause instanceof InterruptedException) {
        Thread.currentThread().interrupt();
        InterruptedIOException interrupted = new InterruptedIOException("interrupted: " + message);
        interrupted.initCause(error);
        return new UncheckedIOException(interrupted);
      }
    }
    return new PulsarConnectorException(message + ": " + describe(error), error);
  }

  /** {@code <simple class name>: <message>} of an error, its cause's for a wrapper without a message of its own. */
  static String describe(Throwable error) {
    Throwable shown = error;
    while (shown.getCause() != null && (shown.getMessage() == null || shown instanceof ExecutionException
        || shown instanceof CompletionException)) {
      shown = shown.getCause();
    }
    return shown.getClass().getSimpleName() + ": " + shown.getMessage();
  }
}
