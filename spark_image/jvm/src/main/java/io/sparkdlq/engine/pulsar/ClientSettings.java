package io.sparkdlq.engine.pulsar;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.MalformedURLException;
import java.net.URI;
import java.net.URISyntaxException;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

import org.apache.pulsar.client.api.AuthenticationFactory;
import org.apache.pulsar.client.api.ClientBuilder;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.pulsar.client.impl.auth.oauth2.AuthenticationFactoryOAuth2;

/**
 * The Pulsar client's security, from the files of the folder the policy's {@code
 * spec.broker.secretRef} Secret is mounted on (one file per Secret key; the names are those of
 * {@code dlq_engine.model.pulsar_client}, which checks the set before the engine starts):
 * {@code ca.crt} the certificates to trust for {@code pulsar+ssl://} (host names verified);
 * {@code tls.crt} and {@code tls.key} a client certificate (mutual TLS); the authentication is
 * {@code token} (read again at each authentication, so a rotated Secret is picked up), else OAuth2
 * client credentials ({@code oauth2.issuerUrl}, {@code oauth2.audience}, optional {@code
 * oauth2.scope}, {@code oauth2.credentials.json}: Pulsar's key file), else the client certificate.
 * Only paths reach the client's configuration: no secret is ever an option, a log line or a
 * Spark conf value.
 */
final class ClientSettings {
  static final String TOKEN = "token";
  static final String CA = "ca.crt";
  static final String CERT = "tls.crt";
  static final String KEY = "tls.key";
  static final String OAUTH2_ISSUER = "oauth2.issuerUrl";
  static final String OAUTH2_AUDIENCE = "oauth2.audience";
  static final String OAUTH2_SCOPE = "oauth2.scope";
  static final String OAUTH2_CREDENTIALS = "oauth2.credentials.json";

  private ClientSettings() {
  }

  /** Configure {@code builder} from {@code clientDir} (nothing when it is empty or absent). */
  static void apply(ClientBuilder builder, String clientDir) throws PulsarClientException {
    if (clientDir.isBlank() || !Files.isDirectory(Path.of(clientDir))) {
      return;
    }
    Path dir = Path.of(clientDir);
    Path ca = dir.resolve(CA);
    if (Files.isRegularFile(ca)) {
      builder.tlsTrustCertsFilePath(ca.toString())
          .allowTlsInsecureConnection(false)
          .enableTlsHostnameVerification(true);
    }
    Path cert = dir.resolve(CERT);
    Path key = dir.resolve(KEY);
    boolean clientCertificate = Files.isRegularFile(cert) && Files.isRegularFile(key);
    if (clientCertificate) {
      builder.tlsCertificateFilePath(cert.toString()).tlsKeyFilePath(key.toString());
    }
    Path token = dir.resolve(TOKEN);
    Path issuer = dir.resolve(OAUTH2_ISSUER);
    if (Files.isRegularFile(token)) {
      builder.authentication(AuthenticationFactory.token(() -> read(token)));
    } else if (Files.isRegularFile(issuer)) {
      Path scope = dir.resolve(OAUTH2_SCOPE);
      builder.authentication(AuthenticationFactoryOAuth2.clientCredentials(
          url(read(issuer)),
          url(dir.resolve(OAUTH2_CREDENTIALS).toUri().toString()),
          read(dir.resolve(OAUTH2_AUDIENCE)),
          Files.isRegularFile(scope) ? read(scope) : null));
    } else if (clientCertificate) {
      builder.authentication(AuthenticationFactory.TLS(cert.toString(), key.toString()));
    }
  }

  private static URL url(String text) throws PulsarClientException {
    try {
      return new URI(text).toURL();
    } catch (URISyntaxException | MalformedURLException | IllegalArgumentException error) {
      throw new PulsarClientException.InvalidConfigurationException(OAUTH2_ISSUER + " is not a URL");
    }
  }

  private static String read(Path file) {
    try {
      return Files.readString(file, StandardCharsets.UTF_8).strip();
    } catch (IOException error) {
      throw new UncheckedIOException("cannot read " + file, error);
    }
  }
}
