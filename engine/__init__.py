"""The engine: a scheduler that decides exactly as vLLM 0.33.0's V1 scheduler does."""

from .async_scheduler import AsyncScheduler
from .config import EngineConfig, SchedulingPolicy
from .core import EngineCore, EngineStep, default_scheduler_cls
from .engine_loop import EngineLoop, RequestFinish, StepRecord
from .errors import ConfigError, InputError, WorkloadError
from .kv_cache_manager import AllocationRefusal, KVCacheManager
from .model_runner import ModelRunner
from .model_runner_choice import create_model_runner
from .outputs import EngineCoreOutput, ModelRunnerOutput
from .probe import Probe
from .request import FinishReason, Request, RequestStatus
from .sampling_params import SamplingParams
from .scheduler import Scheduler
from .scheduler_output import CachedRequestData, NewRequestData, SchedulerOutput
from .step_counts import StepCounts, step_counts
from .step_plan import AdmissionStop, RunningPassEnd, StepPlan
from .tape_runner import TapeModelRunner
from .workload import RequestSpec, Workload, parse_workload
from .workload_file import load_workload

__all__ = [
    "AdmissionStop",
    "AllocationRefusal",
    "AsyncScheduler",
    "CachedRequestData",
    "ConfigError",
    "EngineConfig",
    "EngineCore",
    "EngineCoreOutput",
    "EngineLoop",
    "EngineStep",
    "FinishReason",
    "InputError",
    "KVCacheManager",
    "ModelRunner",
    "ModelRunnerOutput",
    "NewRequestData",
    "Probe",
    "Request",
    "RequestFinish",
    "RequestSpec",
    "RequestStatus",
    "RunningPassEnd",
    "SamplingParams",
    "Scheduler",
    "SchedulerOutput",
    "SchedulingPolicy",
    "StepCounts",
    "StepPlan",
    "StepRecord",
    "TapeModelRunner",
    "Workload",
    "WorkloadError",
    "create_model_runner",
    "default_scheduler_cls",
    "load_workload",
    "parse_workload",
    "step_counts",
]
