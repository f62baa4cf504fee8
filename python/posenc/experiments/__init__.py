"""posenc.experiments: experiments that train small models with posenc's kernels.

extrapolation: "train short, test long" (`posenc experiment extrapolation`,
`python3 -m posenc.experiments.extrapolation`).
"""
