# Airflow with kafka-recon: the official image, Java for spark-submit's driver, and the wheel
# (`make wheel` first) installed by docker/install.sh beside the image's own Airflow, under the
# lock's versions. No checkout, no editable install, no dev extras.
FROM apache/airflow:3.3.2-python3.11
USER root
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
 && apt-get autoremove -yqq --purge \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/*
ENV JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64
USER airflow
COPY --chown=airflow:root docker/install.sh requirements.lock dist/kafka_recon-0.1.0-py3-none-any.whl /tmp/kafka-recon/
RUN INSTALLER=pip sh /tmp/kafka-recon/install.sh python \
      /tmp/kafka-recon/kafka_recon-0.1.0-py3-none-any.whl "apache-airflow==${AIRFLOW_VERSION}" \
      /tmp/kafka-recon/requirements.lock \
 && rm -rf /tmp/kafka-recon
