# Sourced by bench/proxy.sh and bench/bulk.sh: squid's settings for a loopback bench, without its access rules.
#   squid_base_conf DIR PORT HOSTS_FILE   prints them: listen on 127.0.0.1:PORT, files in DIR, no cache, names
#                                         from HOSTS_FILE only (the DNS server is a closed loopback port)
squid_base_conf() {
  cat <<EOF
http_port 127.0.0.1:$2
workers 1
pid_filename $1/squid.pid
coredump_dir $1
cache_log $1/cache.log
access_log stdio:$1/access.log
cache_store_log none
logfile_rotate 0
netdb_filename none
cache deny all
cache_mem 0 MB
hosts_file $3
dns_nameservers 127.0.0.1
visible_hostname bench.squid.local
icp_port 0
htcp_port 0
pinger_enable off
shutdown_lifetime 0 seconds
EOF
}
