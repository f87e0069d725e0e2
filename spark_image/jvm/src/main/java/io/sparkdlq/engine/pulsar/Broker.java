package io.sparkdlq.engine.pulsar;

import java.io.Serializable;

/**
 * A Pulsar cluster as the engine reaches it: its {@code serviceUrl} and {@code clientDir}, the
 * folder where the policy's {@code spec.broker.secretRef} Secret is mounted (empty: none; {@link
 * ClientSettings} reads it). Both travel to the executors; the Secret's content never does.
 */
record Broker(String serviceUrl, String clientDir) implements Serializable {
  /** The option that names the folder of the client's settings. */
  static final String CLIENT_DIR_OPTION = "clientDir";

  Broker {
    clientDir = clientDir == null ? "" : clientDir;
  }

  /** The key of this broker's client and producers in {@link Clients}. */
  String key() {
    return serviceUrl + " " + clientDir;
  }
}
