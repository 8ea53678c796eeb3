# Airflow with kafka-recon: the same lock as `make`, plus Java for spark-submit's driver.
FROM apache/airflow:3.3.2-python3.11
USER root
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
 && rm -rf /var/lib/apt/lists/*
ENV JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64
USER airflow
COPY --chown=airflow:root requirements.lock pyproject.toml README.md /opt/kafka-recon/
COPY --chown=airflow:root kafka_recon /opt/kafka-recon/kafka_recon
RUN pip install --no-cache-dir -r /opt/kafka-recon/requirements.lock \
 && pip install --no-cache-dir --no-deps -e /opt/kafka-recon
# Spark's Kafka connector and JDBC drivers, resolved by `make jars` before the build
COPY --chown=airflow:root .jars/spark /opt/kafka-recon/.jars/spark
