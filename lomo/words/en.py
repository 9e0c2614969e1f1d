"""English sentences for people, by key (see lomo/words/__init__.py)."""

WORDS: dict[str, str] = {
    # Routing
    "route.lost": (
        "I could not tell where this message belongs. Please say it again, or write in the "
        "task itself."
    ),
    "route.okay": "Okay.",
    "route.nothing_to_move": "There is nothing to move.",
    "route.moved": 'Moved to "{goal}".',
    # Cards
    "cards.clarify.which": "Which task do you mean?",
    "cards.clarify.archived": "That task is archived. Reopen it?",
    "cards.clarify.stopped": "That task is stopped. Reopen it?",
    "cards.clarify.new": "Something new",
    # Checklist
    "checklist.yes": "Yes",
    "checklist.no": "No",
    # Presentation
    "present.image": "Here is your image “{name}”.",
    "present.video": "Here is your video “{name}”.",
    "present.audio": "Here is your audio clip “{name}”.",
    "present.3d": "Here is your 3D model “{name}”.",
    "present.many": "Here are your results for “{name}”.",
    # Runtime
    "runtime.checkpoint": "Please confirm: {item}",
    "runtime.yes": "Yes",
    "runtime.no": "No",
    # Flows
    "flow.price": "Flow run: {nodes} paid nodes, {amount} EUR in total",
    # Money
    "money.price": "{kind} with {model}: {amount} EUR",
    "money.credit": "Add credit: {kind} with {model} costs {amount} EUR, {balance} EUR left",
    "money.budget": "Budget for this plan: {amount} EUR — {purpose}",
    # Memory
    "memory.forget": "Forget {what}, and everything derived from it? This cannot be undone.",
    "memory.forget.text": "“{text}”",
    "memory.forget.memory": "memory {memory_id}",
    "memory.forget.yes": "Forget",
    "memory.forget.no": "Keep",
    # Workspace
    "workspace.delete": (
        "Delete {type} “{name}” and all its {versions} version(s)? This cannot be undone."
    ),
    "workspace.delete.yes": "Delete for good",
    "workspace.delete.no": "Keep",
    # Journal
    "journal.moved": (
        '[Notice, not from the person] The message "{said}" belongs to the task "{goal}" '
        "and was moved there. Do not act on it further here."
    ),
}
