"""Interface words of the generated dashboards and alert rules, in both languages.

Everything about a metric (title, definition, bands, reasons) comes from the registry; this module
only holds the words around it: row titles, page titles, variable labels, column names.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LANGS", "Words", "words"]

LANGS: tuple[str, ...] = ("en", "zh")


@dataclass(frozen=True)
class Words:
    """One language's interface words."""

    lang: str
    overview: str
    policy: str
    reward: str
    generation: str
    resources: str
    compare: str
    glossary: str
    health: str
    trend: str
    resource: str
    run: str
    focus: str
    smoothing: str
    step_from: str
    bucket: str
    runs_logged: str
    runs_dense: str
    card: str
    cards: str
    metric: str
    events: str
    step: str
    steps_per_second: str
    nonfinite: str
    active_alerts: str
    gpu_memory: str
    healthy_range: str
    stage_note: str
    relative_band: str
    alerts: str
    what_to_check: str
    term_page: str
    raw_vs_smoothed: str
    line_styles: tuple[str, str, str]
    slope: str
    lines_drawn: str
    line_raw: str
    line_smoothed: str
    line_max: str
    line_slope: str
    line_events: str
    spikes: str
    status: str
    value: str
    deviation: str
    reading: str
    term: str
    definition: str
    kind: str
    text: str
    consecutive: str
    layer: str
    language_link: str
    not_logged: str
    family_runs: str
    any_family: str
    list_sep: str
    by_frameworks: str


_EN = Words(
    lang="en",
    overview="RL vitals · Overview",
    policy="RL vitals · Policy & optimization",
    reward="RL vitals · Reward breakdown",
    generation="RL vitals · Generation",
    resources="RL vitals · Training resources",
    compare="RL vitals · Run comparison",
    glossary="RL vitals · Glossary",
    health="Health — is it alive?",
    trend="Trend — is it learning?",
    resource="Resource — is it efficient?",
    run="run",
    focus="diagnosis run",
    smoothing="smoothing (EMA buckets)",
    step_from="from step",
    bucket="steps per point",
    runs_logged="runs with data",
    runs_dense="runs read from rollups",
    card="Diagnosis",
    cards="Diagnosis of the focused run",
    metric="Metric",
    events="Events (checkpoints, resumes, alerts)",
    step="Current step",
    steps_per_second="Steps per second",
    nonfinite="NaN / Inf samples",
    active_alerts="Active alerts",
    gpu_memory="GPU memory used",
    healthy_range="Healthy range",
    stage_note="drawn for the {stage} stage",
    relative_band="relative to {basis}: judged per run by the diagnosis card",
    alerts="Alerts",
    what_to_check="What to check",
    term_page="Term page",
    line_styles=("solid", "dashed", "dotted"),
    raw_vs_smoothed=(
        "Each run has one colour, in every chart of every dashboard. Thin grey line: the raw "
        "bucket mean; coloured line: its exponential moving average. Metrics in one chart: "
        "{styles}."
    ),
    slope="slope per 1k steps",
    lines_drawn="Lines drawn, per run",
    line_raw="{metric}: thin grey line, the bucket mean (hidden from legend and tooltip)",
    line_smoothed="{metric}: line in the run's colour ({style}), its moving average",
    line_max="{metric}: points, the highest value in each bucket",
    line_slope=(
        "{metric}: thin dashed line, its slope per 1,000 steps (its own scale, no axis drawn; "
        "read it in the tooltip)"
    ),
    line_events="dots at the top: the run's events (checkpoints, resumes, alerts), in the "
    "events table",
    spikes="bucket max",
    status="status",
    value="value",
    deviation="vs history %",
    reading="reading",
    term="term",
    definition="definition",
    kind="kind",
    text="text",
    consecutive="consecutive steps",
    layer="layer",
    language_link="中文",
    not_logged="No selected run logs these metrics. Logged by {families}{frameworks}.",
    family_runs="{names} runs",
    any_family="runs of any algorithm",
    list_sep=", ",
    by_frameworks=" ({names})",
)

_ZH = Words(
    lang="zh",
    overview="RL 生命体征 · 总览",
    policy="RL 生命体征 · 策略与优化",
    reward="RL 生命体征 · 奖励分解",
    generation="RL 生命体征 · 生成",
    resources="RL 生命体征 · 训练资源",
    compare="RL 生命体征 · 运行对比",
    glossary="RL 生命体征 · 术语表",
    health="健康 — 训练还活着吗？",
    trend="趋势 — 在学习吗？",
    resource="资源 — 效率如何？",
    run="运行",
    focus="诊断运行",
    smoothing="平滑（EMA 桶数）",
    step_from="起始步",
    bucket="每点步数",
    runs_logged="有数据的运行数",
    runs_dense="读取汇总块的运行数",
    card="诊断",
    cards="聚焦运行的诊断",
    metric="指标",
    events="事件（检查点、恢复、告警）",
    step="当前步数",
    steps_per_second="每秒步数",
    nonfinite="NaN / Inf 样本",
    active_alerts="活动告警",
    gpu_memory="GPU 显存占用",
    healthy_range="健康区间",
    stage_note="按 {stage} 阶段绘制",
    relative_band="相对于 {basis}：由诊断卡片按运行判断",
    alerts="告警",
    what_to_check="检查什么",
    term_page="术语页",
    line_styles=("实线", "虚线", "点线"),
    raw_vs_smoothed=(
        "每个运行一种颜色，在所有看板的所有图中都相同。细灰线：原始桶均值；彩色线：其指数移动平均。"
        "同一图中的指标：{styles}。"
    ),
    slope="每千步斜率",
    lines_drawn="每个运行绘制的线",
    line_raw="{metric}：细灰线，分桶均值（不在图例与提示中）",
    line_smoothed="{metric}：运行颜色的线（{style}），其移动平均",
    line_max="{metric}：散点，每个分桶的最大值",
    line_slope="{metric}：细虚线，每千步斜率（单独刻度，不画坐标轴；在提示中读数）",
    line_events="顶部圆点：运行的事件（检查点、恢复、告警），详见事件表",
    spikes="桶内最大值",
    status="状态",
    value="数值",
    deviation="相对历史 %",
    reading="解读",
    term="术语",
    definition="定义",
    kind="类型",
    text="内容",
    consecutive="连续步数",
    layer="层级",
    language_link="English",
    not_logged="所选运行均未记录这些指标。记录它们的是{families}{frameworks}。",
    family_runs="{names} 运行",
    any_family="任意算法的运行",
    list_sep="、",
    by_frameworks="（{names}）",
)


def words(lang: str) -> Words:
    """The interface words of `lang` (`en` or `zh`)."""
    if lang == "zh":
        return _ZH
    if lang == "en":
        return _EN
    raise ValueError(f"unknown dashboard language {lang!r}; use one of {', '.join(LANGS)}")
