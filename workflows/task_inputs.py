"""TaskWorkflow's inputs: updates validate and are acknowledged to the api (a refusal
becomes a 409 with its reason); signals come from other workflows."""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from journal.types import TERMINAL_TASK_STATUSES
    from workflows.types import FlowEvent, GenerationEvent, ResumeInput

from workflows.task_state import FINAL_ORDER, TaskState


class TaskInputs(TaskState):
    @workflow.update(name="message")
    def message(self, message_id: str) -> str:
        # A held or already read id is taken again and changes nothing (see _enqueue).
        self._enqueue(message_id)
        return self.status

    @message.validator
    def _validate_message(self, message_id: str) -> None:
        if not message_id:
            raise ApplicationError("message_id is required", type="InvalidInput")
        if message_id in self.consumed:
            # Read already, even if the task has closed since: a refusal would be a 409, and
            # the api would send the message through the main thread to be read again.
            return
        self._refuse_if_closed("messages")

    @workflow.signal(name="deliver")
    def deliver(self, message_id: str) -> None:
        # The main thread checked the task before routing; a closed task drops it (the
        # message stays in the DB as evidence, unprocessed).
        if message_id and not self._closed_reason():
            self._enqueue(message_id)

    @workflow.signal(name="taken_back")
    def taken_back(self, message_id: str) -> None:
        # The person withdrew the message, or moved it to another task, before a step took
        # it (the database decided that): it leaves the inbox, and a later hand-off of it
        # is taken as one already read (no turn runs for it).
        if message_id:
            self._consume([message_id])

    @workflow.update(name="card_answered")
    def card_answered(self, card_id: str) -> str:
        self.answered.add(card_id)
        return self.status

    @card_answered.validator
    def _validate_card(self, card_id: str) -> None:
        self._refuse_if_closed("card answers")
        if card_id not in self.open_cards:
            raise ApplicationError(f"card {card_id} is not open in this task", type="UnknownCard")

    @workflow.signal(name="generation_event")
    def generation_event(self, ev: GenerationEvent) -> None:
        # Duplicates and events for unknown orders change nothing (the DB is the truth).
        if ev.order_id in self.waiting and self.waiting[ev.order_id] not in FINAL_ORDER:
            self.waiting[ev.order_id] = ev.status

    @workflow.signal(name="flow_event")
    def flow_event(self, ev: FlowEvent) -> None:
        # A flow run ended or needs the person: the next turn sees it in the context.
        if not self._closed_reason():
            self.wake = True

    @workflow.update(name="stop")
    def stop(self) -> str:
        self.stop_requested = True
        return "stopping"

    @stop.validator
    def _validate_stop(self) -> None:
        if self.status in TERMINAL_TASK_STATUSES:
            raise ApplicationError(f"task is already {self.status}", type="TaskClosed")

    @workflow.update(name="pause")
    def pause(self) -> str:
        self.pause_requested = True
        return "pausing"

    @pause.validator
    def _validate_pause(self) -> None:
        self._refuse_if_closed("pause")

    @workflow.update(name="resume")
    def resume(self, inp: ResumeInput) -> str:
        assert self.inp is not None
        if inp.max_steps_per_turn:
            self.inp.max_steps_per_turn = inp.max_steps_per_turn
        if inp.max_turns_without_progress:
            self.inp.max_turns_without_progress = inp.max_turns_without_progress
        self.pause_requested = False
        self.resume_requested = True
        return "resuming"

    @resume.validator
    def _validate_resume(self, inp: ResumeInput) -> None:
        # A workflow that is still running while "stopped" was stopped by the runtime (a
        # limit, a blocked step) and can go on; the person's own stop ends the workflow.
        if self._must_end():
            raise ApplicationError("task is being stopped and cannot resume", type="TaskClosed")
        if self.status not in ("paused", "stopped"):
            raise ApplicationError(f"task is {self.status}, not paused", type="NotPaused")
        for v in (inp.max_steps_per_turn, inp.max_turns_without_progress):
            if v is not None and not 1 <= v <= 1000:
                raise ApplicationError("limits must be between 1 and 1000", type="InvalidInput")

    @workflow.update(name="archive")
    def archive(self) -> str:
        self.archive_requested = True
        return "archiving"

    @workflow.signal(name="promote")
    def promote(self) -> None:
        # In place: same workflow, context and journal; only the kind changes.
        if self.kind == "lightweight" and not self._closed_reason():
            self.kind = "persistent"
            self._upsert(self.status)

    @workflow.query(name="state")
    def state(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "kind": self.kind,
            "turn": self.turn,
            "inbox": [e.message_id for e in self.inbox],
            "waiting_orders": [o for o, s in self.waiting.items() if s not in FINAL_ORDER],
            "open_cards": sorted(self.open_cards),
            "stop_reason": self.stop_reason,
        }
