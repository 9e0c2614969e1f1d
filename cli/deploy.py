"""Worker Versioning for operators: make a worker build current, and see the deployment.

A worker started with `LOMO_WORKER_BUILD_ID` polls as that build of the deployment
(`LOMO_DEPLOYMENT_NAME`, default "lomo"). New workflow runs go to the current build.
Task and flow runs are pinned: they finish on the build they started on. The main thread
and memory workflows never end, so they move to the current build at their next workflow
task; their code changes must therefore replay (tests/test_replay.py).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from temporalio.api.enums.v1 import (
    IndexedValueType,
    VersionDrainageStatus,
    WorkerDeploymentVersionStatus,
)
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.api.workflowservice.v1 import (
    DescribeWorkerDeploymentRequest,
    SetWorkerDeploymentCurrentVersionRequest,
)
from temporalio.client import Client
from temporalio.service import RPCError

from lomo.errors import ConfigError
from lomo.temporal import SEARCH_ATTRIBUTES


@dataclass
class BuildState:
    build_id: str
    status: str  # the server's word: CURRENT, DRAINING, DRAINED, INACTIVE, ...
    drainage: str


async def set_current(
    client: Client, deployment: str, build_id: str, wait_seconds: float = 60.0
) -> None:
    """Make `build_id` the deployment's current build. The build must have polled: a build
    whose worker is still starting is waited for, up to `wait_seconds`."""
    request = SetWorkerDeploymentCurrentVersionRequest(
        namespace=client.namespace, deployment_name=deployment, build_id=build_id
    )
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_seconds
    while True:
        try:
            await client.workflow_service.set_worker_deployment_current_version(request)
            return
        except RPCError as e:
            if loop.time() > deadline:
                raise ConfigError(f"build {build_id!r} of {deployment!r}: {e.message}") from e
            await asyncio.sleep(0.5)


async def builds(client: Client, deployment: str) -> list[BuildState]:
    """The deployment's builds, the current one first as the server lists them."""
    got = await client.workflow_service.describe_worker_deployment(
        DescribeWorkerDeploymentRequest(namespace=client.namespace, deployment_name=deployment)
    )
    return [
        BuildState(
            v.deployment_version.build_id,
            WorkerDeploymentVersionStatus.Name(v.status).rsplit("_STATUS_", 1)[-1],
            VersionDrainageStatus.Name(v.drainage_status).rsplit("_STATUS_", 1)[-1],
        )
        for v in got.worker_deployment_info.version_summaries
    ]


async def register_search_attributes(client: Client) -> list[str]:
    """Create Lomo's custom search attributes (lomo/temporal.py) that the namespace lacks,
    as the dev server and the compose stack's admin job do; returns the names created."""
    namespace = client.namespace
    have = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=namespace)
    )
    missing = {
        name: IndexedValueType.Value(f"INDEXED_VALUE_TYPE_{type_.upper()}")
        for name, type_ in SEARCH_ATTRIBUTES.items()
        if name not in have.custom_attributes
    }
    if missing:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(namespace=namespace, search_attributes=missing)
        )
    return sorted(missing)
