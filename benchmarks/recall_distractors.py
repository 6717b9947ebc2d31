"""Generated distractor memories for the semantic Recall benchmark (issue #26).

Natural English memories of a software team, all four types, project and user scope, on the
topics the paraphrase set covers too (tooling and style preferences, services and their owners,
incidents, deadlines, procedures, where things live), so that near misses exist: another
language's formatting rule, another service's owner, another dashboard. Deterministic for a
seed; every memory has a distinct path.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

__all__ = ["Distractor", "distractors"]

SERVICES = (
    "billing", "checkout", "search", "notifications", "auth", "reporting", "inventory",
    "shipping", "payouts", "onboarding", "analytics", "pricing", "catalog", "reviews",
    "messaging", "scheduler", "gateway", "exports", "webhooks", "recommendations", "fraud",
    "subscriptions", "refunds", "identity", "media", "geolocation", "loyalty", "support",
    "compliance", "coupons", "wishlist", "returns", "tax", "invoicing", "warehouse", "routing",
)  # fmt: skip
TOOLS = (
    "Docker", "Terraform", "Ansible", "Jenkins", "GitHub Actions", "CircleCI", "Datadog",
    "Prometheus", "Grafana", "Sentry", "PagerDuty", "Jira", "Confluence", "Notion", "Slack",
    "Figma", "Postman", "Vault", "Consul", "Nginx", "HAProxy", "RabbitMQ", "Kafka", "Redis",
    "Memcached", "Celery", "Airflow", "dbt", "Snowflake", "BigQuery", "Metabase", "Looker",
    "Bazel", "Gradle", "Maven", "npm", "yarn", "pnpm", "Poetry", "pipenv", "tox", "nox",
    "pre-commit", "ESLint", "Prettier", "Black", "isort", "mypy", "pyright", "Jest", "Vitest",
    "Cypress", "Playwright", "Selenium", "Locust", "Helm", "Argo CD", "Pulumi", "Packer",
)  # fmt: skip
LANGUAGES = (
    "Python", "TypeScript", "JavaScript", "Go", "Rust", "Java", "Kotlin", "Swift", "Ruby",
    "PHP", "Elixir", "Scala", "C#", "C++", "Dart", "Haskell",
)  # fmt: skip
PEOPLE = (
    "Alice", "Bruno", "Chen", "Dana", "Emeka", "Fatima", "Gustav", "Hana", "Ivan", "Jonas",
    "Keiko", "Luis", "Marta", "Nikhil", "Olga", "Pavel", "Quinn", "Rosa", "Sami", "Tomas",
    "Uma", "Viktor", "Wen", "Ximena", "Yusuf", "Zoe",
)  # fmt: skip
TEAMS = (
    "platform", "data", "mobile", "growth", "payments", "infrastructure", "security", "QA",
    "design", "support", "frontend", "backend", "SRE", "analytics", "partnerships",
)  # fmt: skip
MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
)  # fmt: skip
DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")
TASKS = (
    "linting the frontend", "bundling assets", "running the unit suite", "provisioning buckets",
    "tracking exceptions", "scheduling batch jobs", "sharing request collections",
    "building release artefacts", "caching sessions", "queueing emails", "drawing wireframes",
    "storing feature toggles", "collecting metrics", "writing end-to-end checks",
    "transforming warehouse tables", "managing JavaScript packages", "sorting imports",
)  # fmt: skip
THINGS = (
    "variable names", "test files", "branch names", "environment variables", "log lines",
    "error codes", "database tables", "REST routes", "CSS classes", "queue names", "metric names",
)  # fmt: skip
CASES = ("snake_case", "camelCase", "kebab-case", "PascalCase", "SCREAMING_SNAKE_CASE")
REGIONS = ("eu-west-1", "us-east-1", "eu-central-1", "ap-southeast-2", "us-west-2")
INFRA = ("ECS Fargate", "a Nomad cluster", "bare-metal hosts", "Cloud Run", "AKS", "Heroku")
DATABASES = ("MySQL", "MongoDB", "DynamoDB", "CockroachDB", "SQLite", "Cassandra", "ClickHouse")
FAILURES = (
    "dropped messages", "double-charged a few customers", "returned stale prices",
    "timed out under load", "lost its connection pool", "filled the disk with logs",
    "sent duplicate emails", "served the wrong locale",
)  # fmt: skip
CAUSES = (
    "a missing index", "an expired API token", "a bad config push", "a race in the retry loop",
    "clock skew between nodes", "an unbounded queue", "a library upgrade",
    "a DNS change nobody announced",
)  # fmt: skip
METRICS = ("error rate", "queue depth", "p95 latency", "CPU saturation", "cache hit ratio")
ADJECTIVES = ("kind", "specific", "brief", "concrete", "direct", "friendly", "actionable")
ROLES = (
    "backend developer", "data engineer", "engineering manager", "mobile developer",
    "site reliability engineer", "product designer", "QA lead", "staff engineer",
)  # fmt: skip
FEATURES = (
    "saved carts", "gift cards", "two-factor login", "CSV exports", "dark mode",
    "partial refunds", "address autocomplete", "usage-based plans", "bulk invoicing",
)  # fmt: skip


@dataclass(frozen=True)
class Distractor:
    scope: str
    type: str
    name: str
    description: str
    body: str


Pick = Callable[[tuple[str, ...]], str]
Template = Callable[[Pick], tuple[str, str, str]]


def _feedback(pick: Pick) -> Iterator[Template]:
    yield lambda p: (
        f"Use {(t := p(TOOLS))} for {(task := p(TASKS))}",
        f"Prefers {t} over {p(TOOLS)} when {task}",
        f"Why: the {p(TEAMS)} team standardised on it last year.\n"
        f"How to apply: suggest {t} first and mention the other only if asked.",
    )
    yield lambda p: (
        f"{(lang := p(LANGUAGES))} naming",
        f"{p(THINGS).capitalize()} in {lang} code use {p(CASES)}",
        "Why: consistency with the generated clients.\nHow to apply: rename on touch, "
        "not in bulk.",
    )
    yield lambda p: (
        "Review comment tone",
        f"Code review comments should be {p(ADJECTIVES)} and {p(ADJECTIVES)}",
        f"{p(PEOPLE)} asked for this after a long thread on the {p(SERVICES)} change.",
    )
    yield lambda p: (
        f"No {(thing := p(THINGS))} in commits",
        f"Never commit {thing} that mention customers",
        "Why: the repository is mirrored to a vendor.\nHow to apply: scrub before pushing.",
    )
    yield lambda p: (
        f"{(lang := p(LANGUAGES))} tests with {(t := p(TOOLS))}",
        f"{lang} checks are written for {t} and run in parallel",
        f"Keep each under a second; slow ones get a marker so CI on {p(DAYS)} nights runs them.",
    )
    yield lambda p: (
        f"Explain {p(LANGUAGES)} idioms",
        f"The user likes short notes on idiomatic {p(LANGUAGES)} when code is written",
        "One sentence per idiom, with a link when there is one.",
    )


def _project(pick: Pick) -> Iterator[Template]:
    yield lambda p: (
        f"{(service := p(SERVICES)).capitalize()} ownership",
        f"{p(PEOPLE)} from the {p(TEAMS)} team owns the {service} service",
        f"Ask them before changing its schema; backup contact is {p(PEOPLE)}.",
    )
    yield lambda p: (
        f"{(service := p(SERVICES)).capitalize()} hosting",
        f"The {service} service runs on {p(INFRA)} in {p(REGIONS)}",
        f"Two replicas minimum; the {p(TEAMS)} team manages the cluster.",
    )
    yield lambda p: (
        f"{(service := p(SERVICES)).capitalize()} latency budget",
        f"The {service} p95 must stay under {p(('80', '120', '200', '350', '500'))} ms",
        f"Alert fires in {p(TOOLS)} when it is exceeded for ten minutes.",
    )
    yield lambda p: (
        f"{(service := p(SERVICES)).capitalize()} moves to {(db := p(DATABASES))}",
        f"The {service} data migrates from {p(DATABASES)} to {db} in {p(MONTHS)}",
        "Dual writes first, then a backfill, then the read switch.",
    )
    yield lambda p: (
        f"{(month := p(MONTHS))} {(service := p(SERVICES))} incident",
        f"In {month} the {service} service {p(FAILURES)}",
        f"Root cause: {p(CAUSES)}. Follow-ups are tracked by the {p(TEAMS)} team.",
    )
    yield lambda p: (
        f"{(feature := p(FEATURES)).capitalize()} deadline",
        f"The {p(TEAMS)} team ships {feature} by {p(MONTHS)} {p(('1', '8', '15', '22'))}",
        f"Sales promised it to a large account; {p(PEOPLE)} tracks scope.",
    )
    yield lambda p: (
        f"{(service := p(SERVICES)).capitalize()} cache",
        f"The {service} service caches responses in {p(('Redis', 'Memcached', 'memory'))}",
        f"Invalidation happens on every {p(SERVICES)} event.",
    )


def _procedure(pick: Pick) -> Iterator[Template]:
    yield lambda p: (
        f"Deploying {(service := p(SERVICES))}",
        f"Deploy {service} with {p(TOOLS)} and watch the {p(METRICS)} panel",
        f"1. merge to main 2. wait for the {p(TOOLS)} pipeline 3. check {p(TOOLS)} for ten "
        "minutes.",
    )
    yield lambda p: (
        f"Rolling back {(service := p(SERVICES))}",
        f"Roll back {service} by redeploying the previous image tag",
        f"Then post in the {p(TEAMS)} channel and open a ticket in {p(TOOLS)}.",
    )
    yield lambda p: (
        f"Debugging {(service := p(SERVICES))} {(metric := p(METRICS))}",
        f"When {service} {metric} climbs, check {p(CAUSES)} first",
        f"Logs are in {p(TOOLS)}; traces in {p(TOOLS)}.",
    )
    yield lambda p: (
        f"Setting up {(t := p(TOOLS))} locally",
        f"Install {t} through the bootstrap script, not by hand",
        f"The script pins the version the {p(TEAMS)} team tested.",
    )
    yield lambda p: (
        f"Adding a {p(SERVICES)} endpoint",
        f"New endpoints need an OpenAPI entry and a {p(TOOLS)} contract check",
        "Review by someone from the owning team is required.",
    )


def _reference(pick: Pick) -> Iterator[Template]:
    yield lambda p: (
        f"{(service := p(SERVICES)).capitalize()} {(metric := p(METRICS))} board",
        f"{metric.capitalize()} for {service} is graphed in {p(TOOLS)}",
        f"Board name: {service}-overview. Ask {p(PEOPLE)} for edit rights.",
    )
    yield lambda p: (
        f"{(service := p(SERVICES)).capitalize()} runbook",
        f"The {service} runbook lives in {p(('Confluence', 'Notion', 'the wiki'))}",
        f"One section per alert; last reviewed in {p(MONTHS)}.",
    )
    yield lambda p: (
        f"{(team := p(TEAMS)).capitalize()} channel",
        f"The {team} team discusses {p(SERVICES)} in #{team.lower()}-{p(SERVICES)}",
        "Announcements pinned at the top.",
    )
    yield lambda p: (
        f"{(service := p(SERVICES)).capitalize()} API reference",
        f"The {service} API reference is generated into docs/{service}/api.md",
        f"Regenerated by {p(TOOLS)} on every merge.",
    )


def _user(pick: Pick) -> Iterator[Template]:
    yield lambda p: (
        "Role",
        f"The user is a {p(ROLES)} on the {p(TEAMS)} team",
        f"Mostly works on {p(SERVICES)} and {p(SERVICES)}.",
    )
    yield lambda p: (
        f"Knows {(lang := p(LANGUAGES))}",
        f"Comfortable with {lang}, still learning {p(LANGUAGES)}",
        "Explain the second one's tooling in more detail.",
    )
    yield lambda p: (
        "Meeting-free day",
        f"Keeps {p(DAYS)} free of meetings for focused work",
        "Do not suggest scheduling syncs then.",
    )


_KINDS: tuple[tuple[str, Callable[[Pick], Iterator[Template]], float], ...] = (
    ("feedback", _feedback, 0.3),
    ("project", _project, 0.35),
    ("reference", _reference, 0.2),
    ("user", _user, 0.15),
)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:48]


def distractors(count: int, seed: int = 26) -> list[tuple[str, Distractor]]:
    """``count`` distinct (relative path, memory) pairs."""
    rng = random.Random(seed)

    def pick(options: tuple[str, ...]) -> str:
        return options[rng.randrange(len(options))]

    templates = {kind: list(make(pick)) for kind, make, _ in _KINDS}
    procedures = list(_procedure(pick))
    kinds = [kind for kind, _, _ in _KINDS]
    weights = [weight for _, _, weight in _KINDS]
    made: list[tuple[str, Distractor]] = []
    seen: set[tuple[str, str]] = set()
    while len(made) < count:
        kind = rng.choices(kinds, weights)[0]
        options = templates[kind] + (procedures if kind == "project" else [])
        name, description, body = rng.choice(options)(pick)
        if (name, description) in seen:
            continue
        seen.add((name, description))
        scope = "user" if kind == "user" or rng.random() < 0.12 else "project"
        path = f"{kind}/{_slug(name)}-{len(made)}.md"
        made.append((path, Distractor(scope, kind, name, description, body)))
    return made
