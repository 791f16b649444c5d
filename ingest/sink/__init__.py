"""The sink: Kafka records -> the store, offsets committed last.

consume   the loop: getmany -> decode (poison: brake, dead-letter) -> Batch
          -> full or old -> dead letters acknowledged -> write rows -> commit
batch     what is held between consuming and committing, and its rows
dlq       the poison brake and the dead-letter topic
"""
