# bash completion for redlock-cli                                  -*- shell-script -*-
#
# Installed as share/bash-completion/completions/redlock-cli (loaded on demand by bash-completion),
# or source it from ~/.bashrc. Needs nothing from the bash-completion package.
#
# Completes subcommands, `cluster` subcommands, the flags of each (global flags are accepted after
# the subcommand too), --persistence and --topology values, --dir and --cacertdir directories, the files of
# --cacert, --cert, --key and --password-file, and after `run ... --` the command to run. Resources, tokens and durations are the user's to type.
#
# Keep in sync with `redlock-cli [COMMAND] --help` (tests/packaging/test_docs.py checks it).

_redlock_cli_global_flags='-h --help --version -n --nodes --password-file --json -v --verbose -q --quiet
  --node-timeout --connect-timeout --drift-factor --retry-count --retry-delay --min-uptime
  --max-ttl --min-replicas --replica-timeout --key-prefix --commands --no-wake-ups --tls --cacert --cacertdir --cert --key --sni --insecure'

# Flags followed by a value: the word after them is never a subcommand.
_redlock_cli_takes_value() {
  case $1 in
    -n | --nodes | --password-file | --node-timeout | --connect-timeout | --drift-factor | --retry-count | \
      --retry-delay | --min-uptime | --max-ttl | --min-replicas | --replica-timeout | --key-prefix | --commands | --cacert | --cacertdir | --cert | --key | \
      --sni | --ttl | --wait | --grace | --renew-deadline | -E | --id | --poll | \
      --conflict-exit-code | --seconds | --concurrency | --hold | --soak | --handoff | --count | --base-port | \
      --dir | --persistence | --topology | --replicas | --bus-port-offset | --delay)
      return 0 ;;
  esac
  return 1
}

_redlock_cli_flags() {  # $1: subcommand, $2: cluster subcommand
  local cluster_flags='--count --base-port --dir --persistence --topology --replicas --bus-port-offset'
  case $1 in
    acquire) echo '--ttl --wait --fair --read --write --fence' ;;
    release) echo '--read' ;;
    extend) echo '--ttl --read' ;;
    status) echo '' ;;
    run) echo '--ttl --wait --grace --renew-deadline -E --conflict-exit-code --fence --fair --read --write' ;;
    elect) echo '--id --ttl --wait --again --renew-deadline --grace' ;;
    observe) echo '--poll' ;;
    cluster)
      if [[ $2 == start ]]; then echo "$cluster_flags --delay"; else echo "$cluster_flags"; fi ;;
    bench) echo '--seconds --concurrency --ttl --hold --soak --handoff' ;;
    demo) echo '--count --base-port --dir --topology' ;;
    doctor) echo '' ;;
  esac
}

_redlock_cli() {
  # Split the line ourselves instead of using COMP_WORDS: bash splits words at ':' and '=', so a
  # node list such as 127.0.0.1:7001,127.0.0.1:7002 would count as several words.
  local line words cur cword
  if [[ -n ${COMP_LINE-} ]]; then
    line=${COMP_LINE:0:${COMP_POINT:-${#COMP_LINE}}}
    read -r -a words <<<"$line"
    if [[ $line =~ [[:space:]]$ ]]; then
      cur=''
      cword=${#words[@]}
    else
      cword=$((${#words[@]} - 1))
      cur=${words[cword]}
    fi
  else
    words=("${COMP_WORDS[@]}")
    cword=$COMP_CWORD
    cur=${COMP_WORDS[COMP_CWORD]}
  fi
  local prev=''
  if ((cword > 0)); then prev=${words[cword - 1]}; fi

  local i=1 w cmd='' sub='' dashdash=0
  while ((i < cword)); do
    w=${words[i]}
    if [[ $w == -- ]]; then
      dashdash=$i
      break
    fi
    if _redlock_cli_takes_value "$w"; then
      ((i += 2))
      continue
    fi
    if [[ $w != -* ]]; then
      if [[ -z $cmd ]]; then
        cmd=$w
      elif [[ $cmd == cluster && -z $sub ]]; then
        sub=$w
      fi
    fi
    ((i++))
  done

  COMPREPLY=()
  if ((dashdash > 0)); then  # run RESOURCE... (elect NAME) -- COMMAND [ARGS...]
    if ((cword == dashdash + 1)); then
      mapfile -t COMPREPLY < <(compgen -c -- "$cur" | sort -u)
    else
      mapfile -t COMPREPLY < <(compgen -f -- "$cur")
    fi
    return 0
  fi

  case $prev in
    --persistence)
      mapfile -t COMPREPLY < <(compgen -W 'none aof' -- "$cur")
      return 0 ;;
    --topology)
      mapfile -t COMPREPLY < <(compgen -W 'standalone sentinel cluster' -- "$cur")
      return 0 ;;
    --dir | --cacertdir)
      mapfile -t COMPREPLY < <(compgen -d -- "$cur")
      return 0 ;;
    --cacert | --cert | --key | --password-file)
      mapfile -t COMPREPLY < <(compgen -f -- "$cur")
      return 0 ;;
  esac
  if _redlock_cli_takes_value "$prev"; then
    return 0  # a value: nothing sensible to offer
  fi
  [[ $cur == --*=* ]] && return 0

  if [[ $cur == -* ]]; then
    local flags
    if [[ -n $cmd ]]; then
      flags="$(_redlock_cli_flags "$cmd" "$sub") $_redlock_cli_global_flags"
    else
      flags=$_redlock_cli_global_flags
    fi
    mapfile -t COMPREPLY < <(compgen -W "$flags" -- "$cur")
    return 0
  fi

  if [[ -z $cmd ]]; then
    mapfile -t COMPREPLY < <(compgen -W 'acquire release extend status run elect leader observe cluster bench demo doctor' -- "$cur")
  elif [[ $cmd == cluster && -z $sub ]]; then
    mapfile -t COMPREPLY < <(compgen -W 'up down status env kill stop cont start' -- "$cur")
  fi
  return 0
}

complete -F _redlock_cli redlock-cli
