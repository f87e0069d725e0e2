"""Development tools for spark-dlq: the local test bed (a real Kafka broker, a real
kube-apiserver with etcd, Spark settings), the local stand-in for the spark-operator, and the
demo. None of this ships in the operator or the Spark image.
"""
