package io.sparkdlq.bench.peers.spring;

import java.util.Collection;
import java.util.Map;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.kafka.annotation.EnableKafka;
import org.springframework.kafka.config.ConcurrentKafkaListenerContainerFactory;
import org.springframework.kafka.core.ConsumerFactory;
import org.springframework.kafka.core.DefaultKafkaConsumerFactory;
import org.springframework.kafka.core.DefaultKafkaProducerFactory;
import org.springframework.kafka.core.KafkaAdmin;
import org.springframework.kafka.core.KafkaTemplate;
import org.springframework.kafka.core.ProducerFactory;
import org.springframework.kafka.listener.ConsumerAwareRebalanceListener;
import org.springframework.kafka.retrytopic.RetryTopicConfigurationSupport;
import org.springframework.scheduling.TaskScheduler;
import org.springframework.scheduling.concurrent.ThreadPoolTaskScheduler;

/** The Kafka clients of the peer: byte-array records, acks=all producers, one consumer thread
 * per source partition; and the retry topic feature (what {@code @EnableKafkaRetryTopic} sets
 * up), with its error handler's {@code seekAfterError} from {@code peer.seek-after-error}
 * (default true, Spring's own default). */
@Configuration
@EnableKafka
public class PeerConfig extends RetryTopicConfigurationSupport {
  private final boolean seekAfterError;

  public PeerConfig(@Value("${peer.seek-after-error:true}") boolean seekAfterError) {
    this.seekAfterError = seekAfterError;
  }

  @Override
  protected void configureCustomizers(CustomizersConfigurer customizers) {
    customizers.customizeErrorHandler(handler -> handler.setSeekAfterError(seekAfterError));
  }

  @Bean
  public KafkaAdmin kafkaAdmin(@Value("${peer.bootstrap}") String bootstrap) {
    return new KafkaAdmin(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap));
  }

  /** Resumes the retry topic's paused partitions when their back-off ends. */
  @Bean
  public TaskScheduler taskScheduler() {
    ThreadPoolTaskScheduler scheduler = new ThreadPoolTaskScheduler();
    scheduler.setPoolSize(1);
    return scheduler;
  }

  @Bean
  public ConsumerFactory<byte[], byte[]> consumerFactory(@Value("${peer.bootstrap}") String bootstrap) {
    return new DefaultKafkaConsumerFactory<>(
        Map.of(
            ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap,
            ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest",
            ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false,
            ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class,
            ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class));
  }

  @Bean
  public ProducerFactory<byte[], byte[]> producerFactory(@Value("${peer.bootstrap}") String bootstrap) {
    return new DefaultKafkaProducerFactory<>(
        Map.of(
            ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap,
            ProducerConfig.ACKS_CONFIG, "all",
            ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true,
            ProducerConfig.LINGER_MS_CONFIG, 5,
            ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class,
            ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class));
  }

  @Bean
  public KafkaTemplate<byte[], byte[]> kafkaTemplate(ProducerFactory<byte[], byte[]> producers) {
    return new KafkaTemplate<>(producers);
  }

  /** The factory of the main listener and of the retry topic's (the retry topic feature reuses
   * the listener's factory). Concurrency: one consumer thread per source partition. */
  @Bean
  public ConcurrentKafkaListenerContainerFactory<byte[], byte[]> kafkaListenerContainerFactory(
      ConsumerFactory<byte[], byte[]> consumers,
      @Value("${peer.partitions}") int partitions,
      @Value("${peer.source}") String source) {
    ConcurrentKafkaListenerContainerFactory<byte[], byte[]> factory =
        new ConcurrentKafkaListenerContainerFactory<>();
    factory.setConsumerFactory(consumers);
    factory.setConcurrency(partitions);
    factory.getContainerProperties().setConsumerRebalanceListener(
        new ConsumerAwareRebalanceListener() {
          @Override
          public void onPartitionsAssigned(Collection<TopicPartition> assigned) {
            if (assigned.stream().anyMatch(tp -> tp.topic().equals(source))) {
              System.out.println("ASSIGNED " + System.currentTimeMillis() + " " + assigned);
              System.out.flush();
            }
          }
        });
    return factory;
  }
}
