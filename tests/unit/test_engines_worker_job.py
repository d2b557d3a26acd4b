"""engines.common.worker_job: a worker process's tasks of one job share one copy of it (one boto3 client)."""

import pickle

from s3commit.committers import create_committer
from s3commit.config.options import StoreOptions
from s3commit.engines import common
from s3commit.store.s3store import S3Store


def job(**options):
    store = S3Store(StoreOptions(endpoint_url="http://127.0.0.1:9", region="us-east-1"))
    return create_committer("magic", "s3://bucket/table", store=store, job_id="0" * 8 + "-0000-0000-0000-" + "0" * 12,
                            **options)


def test_the_tasks_of_one_job_get_the_first_copy_of_it():
    payload = pickle.dumps(job())
    first = common.worker_job(pickle.loads(payload))
    again = common.worker_job(pickle.loads(payload))
    assert again is first and again.store is first.store  # one store: one client for the process


def test_the_same_job_id_with_other_options_is_another_job():
    one = common.worker_job(pickle.loads(pickle.dumps(job(threads=4))))
    other = common.worker_job(pickle.loads(pickle.dumps(job(threads=8))))
    assert other is not one and other.options.threads == 8


def test_only_the_most_recent_jobs_are_kept():
    payloads = [pickle.dumps(job(threads=n)) for n in range(1, 12)]  # each job as its tasks receive it
    kept = [common.worker_job(pickle.loads(payload)) for payload in payloads]
    assert len(common._worker_jobs) == common.WORKER_JOBS_KEPT
    assert common.worker_job(pickle.loads(payloads[-1])) is kept[-1]
    assert common.worker_job(pickle.loads(payloads[0])) is not kept[0]  # dropped, made anew
